// Scenarios of writes to the hub's stores (deploy, node updates, agent rollouts), each ending
// with what the stores read back, in an order that does not depend on the implementation: run on
// two implementations, they must give equal answers (test/e2e/hub-stores-postgres.test.ts).
import type { PodTemplateSpec } from "../../src/api/daemonset.ts";
import type { StoredObject } from "../../src/hub/deploy/store.ts";
import { freshRecord } from "../../src/hub/rollouts/spec.ts";
import type { HubStores } from "../../src/hub/stores-sqlite.ts";
import { deleteRollout, saveRollout } from "./rollout-store-contract.ts";

const template = (image: string): PodTemplateSpec => ({
  metadata: { labels: { app: "web" } },
  spec: { containers: [{ name: "web", image }] },
});

const object = (kind: string, name: string, extra: Record<string, unknown> = {}): StoredObject => ({
  ...{ kind, namespace: "default", name },
  object: { kind, metadata: { uid: `uid-${name}`, name }, ...extra },
});

const byKey = <T>(items: T[], key: (t: T) => string): T[] =>
  [...items].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));

/** Objects of each kind put, replaced and deleted; a DaemonSet's revisions, its rollout record
 * and assignments written by passes (one key changed twice in a pass), then the DaemonSet
 * deleted with everything of it. */
export async function deployScenario({ deploy }: HubStores) {
  const rev = (dsUid: string, hash: string, revision: number, image: string) => ({
    ...{ dsUid, hash, revision, template: template(image) },
    ...(revision === 2 && { changeCause: "image \u0000 bumped" }),
    createdAt: 1_765_000_000_000 + revision,
  });
  await deploy.putObject(object("ConfigMap", "cfg", { data: { a: "1" } }), 1);
  await deploy.putObject(object("Secret", "db", { data: { password: "aHVudGVyMg==" } }), 2);
  await deploy.putObject(object("DaemonSet", "web"), 3, rev("uid-web", "h1", 1, "web:1"));
  await deploy.putObject(
    object("DaemonSet", "web", { generation: 2 }),
    4,
    rev("uid-web", "h2", 2, "web:2"),
  );
  await deploy.putObject(object("DaemonSet", "cam"), 5, rev("uid-cam", "c1", 1, "cam:1"));
  const beforePasses = await deploy.putObject(object("ConfigMap", "cfg", { data: { a: "2" } }), 6);
  await deploy.writePass({
    rollouts: [
      { dsUid: "uid-web", record: { stableHash: "h1" } },
      { dsUid: "uid-web", record: { stableHash: "h1", canaryPassed: "h2" } },
      { dsUid: "uid-cam", record: { stableHash: "c1" } },
    ],
    assignments: [
      { dsUid: "uid-web", node: "cam-1", hash: "h1", at: 10 },
      { dsUid: "uid-web", node: "cam-2", hash: "h1", at: 10 },
      { dsUid: "uid-web", node: "cam-1", hash: "h2", at: 11 },
      { dsUid: "uid-cam", node: "cam-1", hash: "c1", at: 12 },
    ],
    pruned: [],
    statuses: [],
  });
  await deploy.writePass({
    rollouts: [],
    statuses: [],
    assignments: [
      { dsUid: "uid-web", node: "cam-2", hash: null, at: 13 },
      { dsUid: "uid-web", node: "cam-3", hash: "h2", at: 13 },
      { dsUid: "uid-web", node: "cam-3", hash: null, at: 14 },
    ],
    pruned: [
      { dsUid: "uid-web", hash: "h1" },
      { dsUid: "uid-web", hash: "h1" },
    ],
  });
  const middle = await deploy.load();
  await deploy.deleteObject({ kind: "DaemonSet", namespace: "default", name: "cam" }, 7, "uid-cam");
  const last = await deploy.deleteObject(
    { kind: "ConfigMap", namespace: "default", name: "gone" },
    8,
  );
  // The counter is the number each write gave back: the one asked for, or on PostgreSQL the
  // change log's when higher (a pass's logged rows draw from it too).
  const gave = [beforePasses, last];
  return [middle, await deploy.load()].map((s, i) => ({
    resourceVersion: s.resourceVersion === gave[i],
    objects: byKey(s.objects, (o) => `${o.kind}/${o.name}`),
    revisions: byKey(s.revisions, (r) => `${r.dsUid}/${r.hash}`),
    rollouts: byKey(s.rollouts, (r) => r.dsUid),
    assignments: byKey(s.assignments, (a) => `${a.dsUid}/${a.node}`),
  }));
}

/** Wishes set, replaced within one batch and across batches, and removed. */
export async function updateScenario({ updates }: HubStores) {
  await updates.write([]);
  await updates.write([
    { node: "cam-1", version: "0.2.0", setAt: 1 },
    { node: "cam-2", version: "0.2.0", setAt: 1 },
    { node: "cam-1", version: "0.3.0", setAt: 2 },
    { node: "cam-3", version: "0.2.0", setAt: 2 },
    { node: "cam-3", version: null },
  ]);
  const middle = await updates.load();
  await updates.write([
    { node: "cam-2", version: null },
    { node: "cam-4", version: null },
    { node: "cam-1", version: "0.4.0", setAt: 1_765_000_000_123 },
  ]);
  return [middle, await updates.load()].map((w) => byKey(w, (u) => u.node));
}

/** Rollouts saved, one replaced (paused), one deleted; loaded in their order. */
export async function rolloutScenario({ rollouts }: HubStores) {
  const spec = (version: string) => ({
    ...{ version, selector: "tier=edge", canary: "10%" as const, maxUnavailable: 1 },
    ...{ progressDeadlineSeconds: 600, autoRollback: true },
  });
  for (const [name, created] of [
    ["zeta", 3],
    ["alpha", 1],
    ["mid-2", 2],
    ["mid-10", 4],
  ] as const)
    await saveRollout(rollouts, {
      ...{ name, spec: spec("0.2.0"), record: freshRecord(created), created },
    });
  await saveRollout(rollouts, {
    name: "alpha",
    spec: spec("0.3.0"),
    record: { ...freshRecord(5, true), from: { "cam-1": "0.1.0", "cam-2": null } },
    created: 1_765_000_000_001,
  });
  await deleteRollout(rollouts, "zeta");
  await deleteRollout(rollouts, "never");
  return rollouts.load();
}
