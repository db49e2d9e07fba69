// `fleetlet hub migrate` (docs/hub-replicas.md, "Migration from one hub"): copies every store of
// a single hub (read through the store interfaces from its SQLite database) into the stores of
// an empty PostgreSQL database. The interfaces write one store at a time, each call its own
// transaction, so the copy is not one transaction: it is made safe to run again instead. The
// operator token's hash is written last and marks a finished copy; a database holding anything
// without it is one a failed copy left, refused with how to start over.
import type { AuditRecord } from "./audit.ts";
import type { DeployState } from "./deploy/store.ts";
import type { AgentRollout } from "./rollouts/spec.ts";
import type { LoadedState } from "./store.ts";
import type { HubStores } from "./stores-sqlite.ts";
import type { WantedRelease } from "./updates/store.ts";

/** Everything a hub's stores hold, as loaded through their interfaces. */
export interface HubSnapshot {
  fleet: LoadedState;
  deploy: DeployState;
  updates: WantedRelease[];
  rollouts: AgentRollout[];
  /** The audit log, oldest first. */
  audit: AuditRecord[];
}

/** More audit records than any hub keeps: newest() with it returns them all. */
const ALL = Number.MAX_SAFE_INTEGER;

/** Everything `s` holds. */
export async function loadSnapshot(s: HubStores): Promise<HubSnapshot> {
  return {
    fleet: await s.hub.load(),
    deploy: await s.deploy.load(),
    updates: await s.updates.load(),
    rollouts: await s.rollouts.load(),
    audit: (await s.audit.newest(ALL)).reverse(),
  };
}

/** How many rows of each kind a snapshot holds (what a copy reports). */
export function snapshotCounts(x: HubSnapshot): Record<string, number> {
  return {
    nodes: x.fleet.nodes.length,
    joinTokens: x.fleet.joinTokens.length,
    pods: x.fleet.pods.length,
    events: x.fleet.events.length,
    objects: x.deploy.objects.length,
    revisions: x.deploy.revisions.length,
    rolloutRecords: x.deploy.rollouts.length,
    assignments: x.deploy.assignments.length,
    nodeUpdates: x.updates.length,
    agentRollouts: x.rollouts.length,
    auditRecords: x.audit.length,
  };
}

/** Whether a snapshot holds nothing at all (a new database). */
function isEmpty(x: HubSnapshot): boolean {
  return (
    x.fleet.operatorHash === undefined &&
    x.deploy.resourceVersion === 0 &&
    Object.values(snapshotCounts(x)).every((n) => n === 0)
  );
}

/** Why the target may not be written, or undefined when it is empty. */
function refusal(target: HubSnapshot): string | undefined {
  if (isEmpty(target)) return undefined;
  if (target.fleet.operatorHash !== undefined)
    return "the database already holds a hub's data; migrate copies into an empty database only";
  return (
    "the database holds part of a hub's data (a migrate that did not finish?); " +
    "drop the database, create it again (dropdb, createdb) and run migrate again"
  );
}

/** Writes the fleet's tables: tokens, nodes with their Node objects, pods, events. */
async function copyFleet(f: LoadedState, to: HubStores): Promise<void> {
  for (const t of f.joinTokens) await to.hub.saveJoinToken(t);
  for (const { node, ...progress } of f.nodes) {
    to.hub.queueProgress(progress);
    if (node !== undefined) to.hub.queueNode(progress.name, node);
  }
  for (const p of f.pods) to.hub.queuePod(p.node, p.pod.metadata.uid ?? "", p.pod);
  for (const e of f.events) to.hub.queueEvent(e.node, e.event.metadata.name, e.event);
  await to.hub.flush();
}

/** Writes the deploy store: objects with the resourceVersion counter, revisions, records. */
async function copyDeploy(d: DeployState, to: HubStores): Promise<void> {
  const rv = d.resourceVersion;
  const owner = new Map(d.objects.map((o) => [o.object.metadata.uid, o]));
  for (const o of d.objects) await to.deploy.putObject(o, rv);
  for (const r of d.revisions) {
    const ds = owner.get(r.dsUid);
    // A revision whose DaemonSet is gone is not kept by the hub (it goes with its DaemonSet).
    if (ds !== undefined) await to.deploy.putObject(ds, rv, r);
  }
  // A hub with no object left still counts on: deleting no object stores the counter.
  if (d.objects.length === 0 && rv > 0)
    await to.deploy.deleteObject({ kind: "", namespace: "", name: "" }, rv);
  await to.deploy.writePass({
    rollouts: d.rollouts,
    assignments: d.assignments,
    pruned: [],
    statuses: d.statuses,
  });
}

/** Writes the audit log, oldest first, each record's end with it. */
async function copyAudit(records: AuditRecord[], to: HubStores): Promise<void> {
  for (const { id: _, ...entry } of records) await to.audit.append(entry);
}

/**
 * Copies `from` into `to`, which must hold nothing (else throws with refusal()'s reason).
 * `check` may refuse what was loaded before anything is written; `beforeLast` runs after every
 * store's copy. The operator token's hash is written last: until then the target reads as a
 * partial copy.
 */
export async function copyStores(
  from: HubStores,
  to: HubStores,
  steps: { check?: (x: HubSnapshot) => void; beforeLast?: () => Promise<void> } = {},
): Promise<HubSnapshot> {
  const why = refusal(await loadSnapshot(to));
  if (why !== undefined) throw new MigrateRefused(why);
  const x = await loadSnapshot(from);
  steps.check?.(x);
  await copyFleet(x.fleet, to);
  await copyDeploy(x.deploy, to);
  if (x.updates.length > 0) await to.updates.write(x.updates);
  for (const r of x.rollouts) await to.rollouts.change(r.name, () => r);
  await copyAudit(x.audit, to);
  await steps.beforeLast?.();
  if (x.fleet.operatorHash !== undefined) await to.hub.saveOperatorHash(x.fleet.operatorHash);
  return x;
}

/** The target database may not be written (it is not empty). */
export class MigrateRefused extends Error {}
