// ClaimGate (src/hub/pg/claim-gate.ts): a replica's writes of queued reports and its claims of
// nodes do not overlap; claims overlap one another.
import { describe, expect, test } from "bun:test";
import { ClaimGate } from "../../../src/hub/pg/claim-gate.ts";
import { settle } from "../../lib/hub-updates.ts";

/** A promise with its resolve, and a log of when the work started and ended. */
function work(log: string[], name: string) {
  let end: () => void = () => {};
  const done = new Promise<void>((r) => {
    end = r;
  });
  return {
    fn: async () => {
      log.push(`${name} starts`);
      await done;
      log.push(`${name} ends`);
    },
    end,
  };
}

describe("ClaimGate", () => {
  test("a write waits for the claims in flight; a claim asked meanwhile waits for the write", async () => {
    const gate = new ClaimGate();
    const log: string[] = [];
    const [c1, c2, w, c3] = ["claim 1", "claim 2", "write", "claim 3"].map((n) => work(log, n)) as [
      ReturnType<typeof work>,
      ReturnType<typeof work>,
      ReturnType<typeof work>,
      ReturnType<typeof work>,
    ];
    const all = [gate.claim(c1.fn), gate.claim(c2.fn), gate.write(w.fn), gate.claim(c3.fn)];
    await settle();
    expect(log).toEqual(["claim 1 starts", "claim 2 starts"]);
    c1.end();
    await settle();
    expect(log).toEqual(["claim 1 starts", "claim 2 starts", "claim 1 ends"]);
    c2.end();
    await settle();
    expect(log.slice(3)).toEqual(["claim 2 ends", "write starts"]);
    w.end();
    await settle();
    expect(log.slice(5)).toEqual(["write ends", "claim 3 starts"]);
    c3.end();
    await Promise.all(all);
    expect(log.at(-1)).toBe("claim 3 ends");
  });

  test("a write that fails lets the claims waiting for it go on", async () => {
    const gate = new ClaimGate();
    const failed = gate.write(async () => {
      throw new Error("disk full");
    });
    const claimed = gate.claim(async () => "taken");
    await expect(failed).rejects.toThrow("disk full");
    expect(await claimed).toBe("taken");
  });
});
