// The rollout planner of one DaemonSet (docs/deploy.md, "Rolling out a new revision", "Offline
// devices"): given the devices as the hub sees them and the rollout's record, which revision
// each device should be sent now. Pure: the caller observes, this decides, the caller acts.
//
// Invariants: a device that should not run the pod is never assigned; an offline device is
// never moved (except a rollback) nor counted unavailable; once a revision failed, no device is
// moved to it again until the template changes.

/** How a device's pod of one revision is doing, as the hub observed it. */
export interface PodFacts {
  ready: boolean;
  /** Ready, as seen by the hub, for minReadySeconds without a restart. */
  available: boolean;
  /** Why this pod fails the rollout's gate (crash loop, phase Failed), if it does. */
  failure?: string;
}

/** One device as the planner sees it for one DaemonSet. */
export interface DeviceFacts {
  name: string;
  /** Its labels match, it joined, is not revoked and runs hub pods. */
  eligible: boolean;
  online: boolean;
  /** Left out of the rollout (counted neither way), e.g. NameConflict. */
  excluded?: { reason: string; message: string };
  /** The revision hash assigned to it (what the hub sends it). */
  assigned?: string;
  /** When (hub time) it acknowledged the desired state carrying `assigned`. */
  deliveredAt?: number;
  /** Why it cannot use the desired state carrying `assigned` (it refused it, or the hub
   * withheld its Secrets), as a message. */
  refused?: string;
  /** Its reported pods of this DaemonSet, by revision hash. */
  pods: ReadonlyMap<string, PodFacts>;
}

/** What the hub remembers of a DaemonSet's rollouts (kept in its store). */
export interface RolloutRecord {
  /** The last revision rolled out to every online device. */
  stableHash?: string;
  /** The revision whose canary step passed. */
  canaryPassed?: string;
  /** The revision whose rollout stopped, and why. */
  failed?: {
    hash: string;
    device: string;
    message: string;
    at: number;
    /** Whether the devices that got it were sent the stable revision again. */
    rolledBack: boolean;
    /** The devices that had it when it stopped (the first 100). */
    devices?: string[];
  };
}

export interface RolloutSettings {
  /** Resolved against the devices that should run the pod. */
  maxUnavailable: number;
  /** Devices in the canary step; 0: none. */
  canary: number;
  progressDeadlineMs: number;
  autoRollback: boolean;
}

export type RolloutPhase = "Complete" | "Canary" | "Rolling" | "Failed";

export interface RolloutPlan {
  /** Assignments to change: a revision hash, or null to remove the pod. */
  assign: Map<string, string | null>;
  record: RolloutRecord;
  phase: RolloutPhase;
}

export interface PlanInput {
  /** The hash of the DaemonSet's current template. */
  update: string;
  record: RolloutRecord;
  devices: readonly DeviceFacts[];
  settings: RolloutSettings;
  now: number;
}

/** The first reason a device fails the revision `hash`, if it does. */
function deviceFailure(
  d: DeviceFacts,
  hash: string,
  now: number,
  deadlineMs: number,
): string | undefined {
  const pod = d.pods.get(hash);
  if (pod?.failure !== undefined) return pod.failure;
  if (d.refused !== undefined) return d.refused;
  if (!d.online || d.deliveredAt === undefined || pod?.available === true) return undefined;
  if (now - d.deliveredAt > deadlineMs)
    return `its pod was not available within the progress deadline (${Math.round(deadlineMs / 1000)}s)`;
  return undefined;
}

class Planner {
  readonly assign = new Map<string, string | null>();
  record: RolloutRecord;

  constructor(private readonly input: PlanInput) {
    this.record = { ...input.record };
  }

  assigned(d: DeviceFacts): string | undefined {
    const a = this.assign.get(d.name);
    return a === null ? undefined : (a ?? d.assigned);
  }

  set(d: DeviceFacts, hash: string): void {
    if (d.assigned === hash) this.assign.delete(d.name);
    else this.assign.set(d.name, hash);
  }

  available(d: DeviceFacts): boolean {
    const a = this.assigned(d);
    return a !== undefined && d.assigned === a && d.pods.get(a)?.available === true;
  }

  /** Devices that take part in the rollout. */
  members(): DeviceFacts[] {
    return this.input.devices.filter((d) => d.eligible && d.excluded === undefined);
  }

  rollingOut(): boolean {
    const stable = this.record.stableHash;
    return stable !== undefined && stable !== this.input.update;
  }

  /** Sends the stable revision back to every device that got the failing one. */
  rollback(failing: string): void {
    const stable = this.record.stableHash;
    if (stable === undefined) return;
    for (const d of this.input.devices)
      if (d.eligible && this.assigned(d) === failing) this.set(d, stable);
  }

  /** Latches the first failure of the revision being rolled out; true when there is one. */
  gate(): boolean {
    const { update, now, settings } = this.input;
    for (const d of this.members()) {
      if (this.assigned(d) !== update) continue;
      const why = deviceFailure(d, update, now, settings.progressDeadlineMs);
      if (why === undefined) continue;
      const had = this.input.devices.filter((x) => x.eligible && this.assigned(x) === update);
      this.record.failed = {
        hash: update,
        device: d.name,
        message: why,
        at: now,
        rolledBack: settings.autoRollback,
        devices: had.slice(0, 100).map((x) => x.name),
      };
      if (settings.autoRollback) this.rollback(update);
      return true;
    }
    return false;
  }

  /** Moves the first canary devices; true once every canary device is available. */
  canary(): boolean {
    const { update, settings } = this.input;
    const online = this.members().filter((d) => d.online);
    const want = Math.min(settings.canary, online.length);
    const on = online.filter((d) => this.assigned(d) === update);
    for (const d of this.byTurn(online.filter((d) => this.assigned(d) !== update))) {
      if (on.length >= want) break;
      this.set(d, update);
      on.push(d);
    }
    return want > 0 && on.every((d) => this.available(d));
  }

  /** Unavailable devices first (moving them makes nothing worse), then by name. */
  byTurn(list: DeviceFacts[]): DeviceFacts[] {
    return [...list].sort(
      (a, b) =>
        Number(this.available(a)) - Number(this.available(b)) || a.name.localeCompare(b.name),
    );
  }

  /** Moves online devices to `update`, keeping at most maxUnavailable unavailable. */
  roll(): void {
    const { update, settings } = this.input;
    const online = this.members().filter((d) => d.online);
    let budget = settings.maxUnavailable - online.filter((d) => !this.available(d)).length;
    for (const d of this.byTurn(online.filter((d) => this.assigned(d) !== update))) {
      if (!this.available(d)) this.set(d, update);
      else if (budget > 0) {
        this.set(d, update);
        budget--;
      }
    }
  }

  /** Every online member is available on `update`; with members but none online, a revision
   * no device has run is not complete. */
  complete(): boolean {
    const { update } = this.input;
    const members = this.members();
    const online = members.filter((d) => d.online);
    if (members.length > 0 && online.length === 0) return false;
    return online.every((d) => this.assigned(d) === update && this.available(d));
  }
}

/** Plans one pass of a DaemonSet's rollout. */
export function planRollout(input: PlanInput): RolloutPlan {
  const p = new Planner(input);
  const { update } = input;
  if (p.record.failed !== undefined && p.record.failed.hash !== update) delete p.record.failed;
  for (const d of input.devices)
    if (!d.eligible && d.assigned !== undefined) p.assign.set(d.name, null);
  const failed = p.record.failed?.hash === update;
  const stable = p.record.stableHash;
  // A device new to the DaemonSet: the revision others are settled on.
  const fresh =
    failed || (p.rollingOut() && p.record.canaryPassed !== update) ? (stable ?? update) : update;
  for (const d of input.devices) if (d.eligible && d.assigned === undefined) p.set(d, fresh);
  if (failed) {
    if (p.record.failed?.rolledBack) p.rollback(update);
    return { assign: p.assign, record: p.record, phase: "Failed" };
  }
  if (p.rollingOut()) {
    if (p.gate()) return { assign: p.assign, record: p.record, phase: "Failed" };
    if (p.record.canaryPassed !== update && input.settings.canary > 0) {
      if (!p.canary()) return { assign: p.assign, record: p.record, phase: "Canary" };
    }
    p.record.canaryPassed = update;
  }
  p.roll();
  if (!p.complete()) return { assign: p.assign, record: p.record, phase: "Rolling" };
  p.record.stableHash = update;
  p.record.canaryPassed = update;
  return { assign: p.assign, record: p.record, phase: "Complete" };
}
