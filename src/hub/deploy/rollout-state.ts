// What the deployer (deployer.ts) holds of its DaemonSets' rollouts: which revision each device
// is sent (the assignments) and the device generation that first carried it, each rollout's
// record, the pods' readiness as observed, and what is shown of each (shown.ts). `step` is one
// DaemonSet's part of the leader's pass: it observes the devices, plans (plan.ts), and puts what
// it decided in the pass's writes; a replica that does not lead observes alike for its views.
// Invariant: a device's progress deadline starts when it acknowledges the first generation
// that carried its assignment (deliveredAt), never before.
import type { DaemonSet } from "../../api/daemonset.ts";
import { DEFAULT_NAMESPACE } from "../../api/index.ts";
import { objectsUsedBy } from "../../api/pod-objects.ts";
import { jsonEqual } from "../../util/canonical.ts";
import type { Logger } from "../../util/log.ts";
import type { DaemonSetCatalog } from "./daemonsets.ts";
import {
  type FleetReader,
  type ObservedDevice,
  observeDevices,
  ReadinessTracker,
} from "./observe.ts";
import { planRollout, type RolloutRecord } from "./plan.ts";
import { type Observation, RolloutShown } from "./shown.ts";
import { type RolloutView, rolloutSettings } from "./status.ts";
import type { DeployState, PassWrites } from "./store.ts";

export interface RolloutStateDeps {
  fleet: FleetReader;
  log: Logger;
  /** Whether the device was last sent its desired state without its Secrets. */
  withheld(node: string): boolean;
}

/** One pass, as a DaemonSet's step sees it. */
export interface PassStep {
  catalog: DaemonSetCatalog;
  now: number;
  writes: PassWrites;
  /** A device whose assignment changed (its desired state is rebuilt). */
  changed(node: string): void;
  /** A device no longer in the fleet, whose assignment was removed. */
  gone(node: string): void;
}

export class RolloutState {
  private readonly records = new Map<string, RolloutRecord>();
  /** dsUid → node → assigned hash. */
  private readonly assignments = new Map<string, Map<string, string>>();
  /** dsUid\0node → the hash and the device generation that first carried it. */
  private readonly carried = new Map<string, { hash: string; generation: number; at?: number }>();
  private readonly tracker = new ReadinessTracker();
  readonly shown: RolloutShown;

  constructor(private readonly deps: RolloutStateDeps) {
    this.shown = new RolloutShown(deps.log);
  }

  /** Takes what was loaded in place of everything held. */
  reset(loaded: DeployState): void {
    this.records.clear();
    this.carried.clear();
    this.shown.reset(loaded.statuses);
    for (const r of loaded.rollouts) this.records.set(r.dsUid, r.record);
    this.replaceAssignments(loaded.assignments);
  }

  /** Takes `list` (the leader's, as stored) in place of the assignments held. */
  replaceAssignments(list: readonly { dsUid: string; node: string; hash: string }[]): void {
    this.assignments.clear();
    for (const a of list) this.assignedOf(a.dsUid).set(a.node, a.hash);
  }

  private assignedOf(dsUid: string): Map<string, string> {
    let m = this.assignments.get(dsUid);
    if (m === undefined) {
      m = new Map();
      this.assignments.set(dsUid, m);
    }
    return m;
  }

  /** The hash assigned to `node` of DaemonSet `dsUid`. */
  hashOf(dsUid: string, node: string): string | undefined {
    return this.assignments.get(dsUid)?.get(node);
  }

  /** Sets (`hash` null: removes) an assignment, with nothing else. */
  assign(dsUid: string, node: string, hash: string | null): void {
    if (hash !== null) this.assignedOf(dsUid).set(node, hash);
    else this.assignments.get(dsUid)?.delete(node);
  }

  /** Every device with an assignment. */
  assignedNodes(): Set<string> {
    const out = new Set<string>();
    for (const nodes of this.assignments.values()) for (const n of nodes.keys()) out.add(n);
    return out;
  }

  /** Drops what is held of a deleted DaemonSet; gives the devices it was assigned to. */
  forget(uid: string): string[] {
    const nodes = [...(this.assignments.get(uid)?.keys() ?? [])];
    for (const node of nodes) this.carried.delete(`${uid}\u0000${node}`);
    this.assignments.delete(uid);
    this.records.delete(uid);
    this.shown.forget(uid);
    return nodes;
  }

  /** Remembers the generation that first carries each of the device's assignments. */
  noteCarried(node: string, generation: number): void {
    for (const [uid, nodes] of this.assignments) {
      const hash = nodes.get(node);
      const key = `${uid}\u0000${node}`;
      if (hash === undefined) this.carried.delete(key);
      else if (this.carried.get(key)?.hash !== hash) this.carried.set(key, { hash, generation });
    }
  }

  private deliveredAt(uid: string, node: string, hash: string, now: number): number | undefined {
    const rec = this.deps.fleet.nodes.get(node);
    if (rec === undefined) return undefined;
    const key = `${uid}\u0000${node}`;
    let c = this.carried.get(key);
    if (c === undefined || c.hash !== hash) {
      c = { hash, generation: rec.desiredGeneration };
      this.carried.set(key, c);
    }
    if (rec.ackedGeneration < c.generation) return undefined;
    c.at ??= now;
    return c.at;
  }

  /** One DaemonSet's part of a pass: observes, plans, and puts what it decided in the writes. */
  step(ds: DaemonSet, p: PassStep): void {
    const { now, writes } = p;
    const uid = ds.metadata.uid ?? "";
    const assigned = this.assignedOf(uid);
    for (const node of [...assigned.keys()]) {
      if (this.deps.fleet.nodes.has(node)) continue;
      this.setAssignment(uid, node, null, p);
      p.gone(node);
    }
    const o = this.observe(p.catalog, ds, now);
    const record = this.records.get(uid) ?? {};
    const { update, settings } = o;
    const plan = planRollout({ update, record, devices: o.devices, settings, now });
    for (const [node, hash] of plan.assign) this.setAssignment(uid, node, hash, p);
    if (!jsonEqual(plan.record, record)) {
      this.records.set(uid, plan.record);
      writes.rollouts.push({ dsUid: uid, record: plan.record });
    }
    const devices: ObservedDevice[] = o.devices.map((d) => {
      const next = plan.assign.get(d.name);
      if (next === undefined) return d;
      const { assigned: _old, ...rest } = d;
      return next === null ? rest : { ...rest, assigned: next };
    });
    const shown = this.shown.show({ ...o, devices, record: plan.record, phase: plan.phase }, now);
    if (shown !== undefined) writes.statuses.push(shown);
    const inUse = new Set([...assigned.values(), ...devices.flatMap((d) => [...d.pods.keys()])]);
    for (const hash of p.catalog.prune(ds, inUse)) writes.pruned.push({ dsUid: uid, hash });
  }

  /** Ends a pass: forgets the readiness of pods no longer observed. */
  endPass(): void {
    this.tracker.sweep();
  }

  private setAssignment(uid: string, node: string, hash: string | null, p: PassStep): void {
    this.assign(uid, node, hash);
    p.writes.assignments.push({ dsUid: uid, node, hash, at: p.now });
    p.changed(node);
  }

  /** At a replica that does not lead: the rollout views of every DaemonSet, from what this
   * replica observes of the devices, with the phase and record the leader stored. */
  followedViews(catalog: DaemonSetCatalog, now: number): Map<string, RolloutView> {
    const views = new Map<string, RolloutView>();
    for (const ds of catalog.list()) {
      const view = this.shown.followed(this.observe(catalog, ds, now));
      if (view !== undefined) views.set(ds.metadata.uid ?? "", view);
    }
    this.endPass();
    return views;
  }

  /** The devices of `ds` as this replica observes them now, with what a view is made of. */
  private observe(catalog: DaemonSetCatalog, ds: DaemonSet, now: number): Observation {
    const uid = ds.metadata.uid ?? "";
    const assigned = this.assignedOf(uid);
    const used = [
      ...objectsUsedBy({
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: ds.metadata.name, namespace: ds.metadata.namespace ?? DEFAULT_NAMESPACE },
        spec: ds.spec.template.spec,
      }),
    ];
    const devices = observeDevices(ds, {
      usesObjects: used.length > 0,
      usesSecrets: used.some((k) => k.startsWith("Secret/")),
      withheld: (node) => this.deps.withheld(node),
      fleet: this.deps.fleet,
      tracker: this.tracker,
      now,
      minReadyMs: (ds.spec.minReadySeconds ?? 0) * 1000,
      assigned: (node) => assigned.get(node),
      deliveredAt: (node) => {
        const hash = assigned.get(node);
        return hash === undefined ? undefined : this.deliveredAt(uid, node, hash, now);
      },
    });
    const revisionOf = (hash: string | undefined) =>
      hash === undefined ? undefined : catalog.revision(uid, hash)?.revision;
    const settings = rolloutSettings(ds, devices);
    return { ds, devices, update: catalog.current(ds).hash, settings, revisionOf };
  }
}
