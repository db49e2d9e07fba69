// The contract every implementation of the deploy store (src/hub/deploy/store.ts) keeps, as one
// suite run against each: what is written comes back from load() after the store is opened
// again; each call's writes land together; a DaemonSet's removal takes its revisions, rollout
// record and assignments, and only its own.
import { describe, expect, test } from "bun:test";
import type { PodTemplateSpec } from "../../src/api/daemonset.ts";
import type { DeployStore, RevisionRecord, StoredObject } from "../../src/hub/deploy/store.ts";
import { type Backing, onBacking } from "./store-backing.ts";

const template = (image: string): PodTemplateSpec => ({
  metadata: { labels: { app: "web" } },
  spec: { containers: [{ name: "web", image }] },
});

const daemonSet = (name: string, uid: string, rv: number): StoredObject => ({
  kind: "DaemonSet",
  namespace: "default",
  name,
  object: { kind: "DaemonSet", metadata: { name, uid }, status: { observedGeneration: rv } },
});

const secret = (name: string, value: string): StoredObject => ({
  kind: "Secret",
  namespace: "default",
  name,
  object: { kind: "Secret", metadata: { name }, data: { password: btoa(value) } },
});

const revision = (dsUid: string, hash: string, n: number, o: Partial<RevisionRecord> = {}) => ({
  ...{ dsUid, hash, revision: n, template: template(`busybox:${n}`), createdAt: 1000 + n },
  ...o,
});

const pass = (o: Partial<Parameters<DeployStore["writePass"]>[0]> = {}) => ({
  ...{ rollouts: [], assignments: [], pruned: [], statuses: [] },
  ...o,
});

export function deployStoreContract(
  name: string,
  backing: () => Promise<Backing<DeployStore>>,
): void {
  const run = (fn: (open: () => Promise<DeployStore>) => Promise<void>) => onBacking(backing, fn);

  describe(`the deploy store contract: ${name}`, () => {
    test(
      "a new store loads empty",
      run(async (open) => {
        expect(await (await open()).load()).toEqual({
          ...{ resourceVersion: 0, objects: [], revisions: [] },
          ...{ rollouts: [], assignments: [], statuses: [] },
        });
      }),
    );

    test(
      "an object is written with the resourceVersion and its DaemonSet's revision; a later one replaces it",
      run(async (open) => {
        const a = await open();
        await a.putObject(daemonSet("web", "u1", 1), 1, revision("u1", "h1", 1));
        await a.putObject(secret("db", "hunter2"), 2);
        await a.putObject(daemonSet("web", "u1", 3), 3, revision("u1", "h2", 2));
        // An old template applied again: its revision renumbered, under the same hash.
        await a.putObject(
          daemonSet("web", "u1", 4),
          4,
          revision("u1", "h1", 3, { changeCause: "back" }),
        );
        const loaded = await (await open()).load();
        expect(loaded.resourceVersion).toBe(4);
        const objects = loaded.objects.map((o) => o.object);
        expect(objects).toHaveLength(2);
        expect(objects).toContainEqual(daemonSet("web", "u1", 4).object);
        expect(objects).toContainEqual(secret("db", "hunter2").object);
        const revisions = [...loaded.revisions].sort((x, y) => x.revision - y.revision);
        expect(revisions).toEqual([
          revision("u1", "h2", 2),
          revision("u1", "h1", 3, { changeCause: "back" }),
        ]);
      }),
    );

    test(
      "deleting an object sets the resourceVersion; a DaemonSet's takes its revisions, rollout and assignments",
      run(async (open) => {
        const a = await open();
        await a.putObject(daemonSet("web", "u1", 1), 1, revision("u1", "h1", 1));
        await a.putObject(daemonSet("cam", "u2", 2), 2, revision("u2", "k1", 1));
        await a.putObject(secret("db", "x"), 3);
        await a.writePass(
          pass({
            rollouts: [
              { dsUid: "u1", record: { stableHash: "h1" } },
              { dsUid: "u2", record: { stableHash: "k1" } },
            ],
            assignments: [
              { dsUid: "u1", node: "cam-1", hash: "h1", at: 5 },
              { dsUid: "u2", node: "cam-1", hash: "k1", at: 5 },
            ],
          }),
        );
        await a.deleteObject({ kind: "DaemonSet", namespace: "default", name: "web" }, 4, "u1");
        const stored = await a.deleteObject(
          { kind: "Secret", namespace: "default", name: "db" },
          5,
        );
        const loaded = await (await open()).load();
        // The number asked for, or on PostgreSQL the change log's when higher (the pass's
        // logged rows drew from it too).
        expect(stored).toBeGreaterThanOrEqual(5);
        expect(loaded.resourceVersion).toBe(stored);
        expect(loaded.objects.map((o) => o.name)).toEqual(["cam"]);
        expect(loaded.revisions.map((r) => r.dsUid)).toEqual(["u2"]);
        expect(loaded.rollouts).toEqual([{ dsUid: "u2", record: { stableHash: "k1" } }]);
        expect(loaded.assignments).toEqual([{ dsUid: "u2", node: "cam-1", hash: "k1", at: 5 }]);
      }),
    );

    test(
      "a pass writes rollout records, assignments (null: removed) and pruned revisions",
      run(async (open) => {
        const a = await open();
        await a.putObject(daemonSet("web", "u1", 1), 1, revision("u1", "h1", 1));
        await a.putObject(daemonSet("web", "u1", 2), 2, revision("u1", "h2", 2));
        await a.writePass(
          pass({
            rollouts: [{ dsUid: "u1", record: { stableHash: "h1" } }],
            assignments: [
              { dsUid: "u1", node: "cam-1", hash: "h1", at: 5 },
              { dsUid: "u1", node: "cam-2", hash: "h1", at: 5 },
            ],
          }),
        );
        await a.writePass(pass());
        await a.writePass(
          pass({
            rollouts: [{ dsUid: "u1", record: { stableHash: "h2" } }],
            assignments: [
              { dsUid: "u1", node: "cam-1", hash: "h2", at: 9 },
              { dsUid: "u1", node: "cam-2", hash: null, at: 9 },
            ],
            pruned: [{ dsUid: "u1", hash: "h1" }],
          }),
        );
        const loaded = await (await open()).load();
        expect(loaded.rollouts).toEqual([{ dsUid: "u1", record: { stableHash: "h2" } }]);
        expect(loaded.assignments).toEqual([{ dsUid: "u1", node: "cam-1", hash: "h2", at: 9 }]);
        expect(loaded.revisions.map((r) => r.hash)).toEqual(["h2"]);
      }),
    );

    test(
      "a pass writes each DaemonSet's status, the last of one uid kept; a DaemonSet's removal takes its own",
      run(async (open) => {
        const a = await open();
        await a.putObject(daemonSet("web", "u1", 1), 1, revision("u1", "h1", 1));
        await a.putObject(daemonSet("cam", "u2", 2), 2, revision("u2", "k1", 1));
        const conditions = [
          { type: "Progressing", status: "True" as const, message: "nul \u0000 ok" },
        ];
        const status = (n: number) => ({
          ...{ desiredNumberScheduled: n, currentNumberScheduled: n, numberMisscheduled: 0 },
          ...{ numberReady: n, updatedNumberScheduled: n, numberAvailable: n },
          ...{ numberUnavailable: 0, observedGeneration: 1, conditions },
        });
        const shown = (dsUid: string, n: number) => ({
          ...{ dsUid, status: status(n), phase: "Rolling" as const, since: 1000 + n },
          record: { stableHash: "h1" },
        });
        await a.writePass(pass({ statuses: [shown("u1", 1), shown("u2", 2), shown("u1", 3)] }));
        const loaded = await (await open()).load();
        const byUid = (l: typeof loaded) =>
          [...l.statuses].sort((x, y) => x.dsUid.localeCompare(y.dsUid));
        expect(byUid(loaded)).toEqual([shown("u1", 3), shown("u2", 2)]);
        await a.deleteObject({ kind: "DaemonSet", namespace: "default", name: "web" }, 3, "u1");
        expect(byUid(await (await open()).load())).toEqual([shown("u2", 2)]);
      }),
    );
  });
}
