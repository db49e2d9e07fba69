// The contract every implementation of the audit log's store (src/hub/audit.ts, AuditStore)
// keeps, as one suite run against each: appended records get growing ids, an update sets fields
// and keeps the others, and newest() lists the newest first, of one node when asked, after the
// store is opened again.
import { describe, expect, test } from "bun:test";
import type { AuditEntry, AuditStore } from "../../src/hub/audit.ts";
import { type Backing, onBacking } from "./store-backing.ts";

const session = (node: string, started: string): AuditEntry => ({
  ...{ kind: "exec", user: "operator", client: "127.0.0.1", userAgent: "kubectl" },
  ...{ node, namespace: "default", pod: "web", command: ["sh"], tty: true, started },
});

export function auditStoreContract(
  name: string,
  backing: () => Promise<Backing<AuditStore>>,
): void {
  const run = (fn: (open: () => Promise<AuditStore>) => Promise<void>) => onBacking(backing, fn);

  describe(`the audit store contract: ${name}`, () => {
    test(
      "a new store lists nothing",
      run(async (open) => {
        expect(await (await open()).newest(100)).toEqual([]);
      }),
    );

    test(
      "records get growing ids; an update sets fields and keeps the others; an unknown id is ignored",
      run(async (open) => {
        const a = await open();
        const first = await a.append(session("cam-1", "2026-12-06T10:00:00Z"));
        const second = await a.append(session("cam-2", "2026-12-06T10:01:00Z"));
        expect(second).toBeGreaterThan(first);
        const ended = { ended: "2026-12-06T10:05:00Z", outcome: "exit 0", connections: 2 };
        await a.update(first, ended);
        await a.update(second + 1000, { outcome: "nope" });
        const b = await open();
        expect(await b.newest(100)).toEqual([
          { id: second, ...session("cam-2", "2026-12-06T10:01:00Z") },
          { id: first, ...session("cam-1", "2026-12-06T10:00:00Z"), ...ended },
        ]);
        expect(await b.append(session("cam-1", "2026-12-06T11:00:00Z"))).toBeGreaterThan(second);
      }),
    );

    test(
      "newest() takes the newest `limit`, of one node when given",
      run(async (open) => {
        const a = await open();
        const ids: number[] = [];
        for (const [i, node] of ["cam-1", "cam-2", "cam-1", "cam-2", "cam-1"].entries())
          ids.push(await a.append(session(node, `2026-12-06T10:0${i}:00Z`)));
        // Which append each listed record was, in the order listed.
        const nth = (rs: { id: number }[]) => rs.map((r) => ids.indexOf(r.id));
        expect(nth(await a.newest(2))).toEqual([4, 3]);
        expect(nth(await a.newest(2, "cam-1"))).toEqual([4, 2]);
        expect(nth(await a.newest(100, "cam-2"))).toEqual([3, 1]);
        expect(await a.newest(100, "cam-9")).toEqual([]);
      }),
    );
  });
}
