// ClaimBatcher (src/hub/pg/claim-batch.ts): claims asked together share one run; a name asked
// again while it waits goes to the next run; one run at a time.
import { describe, expect, test } from "bun:test";
import { ClaimBatcher } from "../../../src/hub/pg/claim-batch.ts";

describe("ClaimBatcher", () => {
  test("names asked together share one run; a name asked twice, and asks made while a run runs, go to the next", async () => {
    const runs: string[][] = [];
    let open: () => void = () => {};
    const b = new ClaimBatcher<number>(async (replica, names) => {
      expect(replica).toBe("hub-a");
      runs.push(names);
      if (runs.length === 1)
        await new Promise<void>((r) => {
          open = r;
        });
      return new Map(names.map((n) => [n, runs.length]));
    });
    const first = [b.ask("a", "hub-a"), b.ask("b", "hub-a"), b.ask("a", "hub-a")];
    await Bun.sleep(1);
    expect(runs).toEqual([["a", "b"]]);
    const during = b.ask("c", "hub-a");
    open();
    expect(await Promise.all([...first, during])).toEqual([1, 1, 2, 2]);
    expect(runs).toEqual([
      ["a", "b"],
      ["a", "c"],
    ]);
  });

  test("a run that fails rejects its asks only; a name the run did not answer is rejected", async () => {
    const b = new ClaimBatcher<number>(async (_replica, names) => {
      if (names.includes("bad")) throw new Error("store down");
      return new Map(names.filter((n) => n !== "lost").map((n) => [n, 1]));
    });
    const asks = [b.ask("bad", "hub-a"), b.ask("lost", "hub-a")];
    const failed = await Promise.allSettled(asks);
    expect(failed.map((r) => r.status === "rejected" && String(r.reason))).toEqual([
      "Error: store down",
      "Error: store down",
    ]);
    expect(await b.ask("ok", "hub-a")).toBe(1);
    await expect(b.ask("lost", "hub-a")).rejects.toThrow("node lost was not claimed");
  });
});
