// The device manager's core (the kubelet's ManagerImpl): devices as endpoints list them,
// admission, allocation, the checkpoint, and the grace period of plugins that went away. The
// registration server and host devices are added by the caller through addEndpoint().
// Invariants:
// - a device id is held by at most one pod (a regular init container's ids are reused by the
//   same pod's later containers only); held ids stay held until the pod is gone, whatever
//   happens to the device or its plugin, and across agent restarts (the checkpoint);
// - allocations run one at a time (a promise chain), so two pods never get the same free id;
// - a pod's entries are recorded all at once, and only after every Allocate answered and the
//   checkpoint was written;
// - a resource is "served" when its endpoint is live and has listed its devices; "known" when it
//   is in the table (checkpoint, registered, or gone less than the grace period ago) or is a
//   host device group; anything else nobody serves.
import type {
  ResourceStatus as ApiResourceStatus,
  Container,
  EventType,
  Pod,
} from "../../../api/types.ts";
import { type Clock, sleepQuietly } from "../../../util/clock.ts";
import type { Logger } from "../../../util/log.ts";
import type { StateWrites } from "../../events/state-writes.ts";
import type { AdmitFailure } from "../../lifecycle/index.ts";
import { type CheckpointEntry, readCheckpoint, writeCheckpoint } from "./checkpoint.ts";
import type { DeviceManager, DevicePreparation, DeviceStats } from "./index.ts";
import { type PodDeviceNeeds, podDeviceNeeds } from "./needs.ts";
import { mergeAllocations, PodDevices } from "./pod-devices.ts";
import {
  allocatePod,
  checkWaits,
  outOf,
  type PrepareContext,
  requestedUnavailable,
  unexpected,
} from "./prepare.ts";
import { DeviceResources, healthyCount } from "./resources.ts";
import type { ContainerAllocation, DevicePluginEndpoint } from "./types.ts";

/** The kubelet's grace period for a plugin that went away, and fleetlet's default wait. */
const DEFAULT_GRACE_PERIOD_MS = 5 * 60_000;
const DEFAULT_WAIT_TIMEOUT_MS = 5 * 60_000;
/** How often run() looks for expired resources and waits. */
const EXPIRY_CHECK_MS = 5_000;

export interface DeviceManagerCoreDeps {
  clock: Clock;
  logger: Logger;
  /** The device plugin folder, which holds the checkpoint. */
  checkpointDir: string;
  /** How long a pod waits for a known resource's plugin to register (devicePluginWaitTimeout). */
  waitTimeoutMs?: number;
  /** How long a resource whose plugin went away stays in capacity. */
  gracePeriodMs?: number;
  /** Resources known before their first list (host device groups). */
  knownResources?: readonly string[];
  /** Records an event on a pod. */
  event(pod: Pod, type: EventType, reason: string, message: string): void;
  /** The pods that hold or may hold devices (admitted and not terminated). */
  activePods(): Pod[];
  /** Whether every pod source was seen once; until then no pod's devices are freed (a pod not
   * seen yet may be running with them). Absent: always. */
  sourcesReady?: () => boolean;
  /** Where a failed write of the checkpoint is said. */
  stateWrites?: StateWrites;
}

const uidOf = (pod: Pod) => pod.metadata.uid ?? "";

export class DeviceManagerCore implements DeviceManager {
  private readonly waitTimeoutMs: number;
  /** The resources and their endpoints. */
  private readonly resources: DeviceResources;
  /** What each pod's containers hold. */
  private readonly podDevices: PodDevices;
  /** Device needs of pods admitted whose devices are not allocated yet, by pod UID. */
  private readonly admitted = new Map<string, Record<string, number>>();
  /** When each pod first waited for a plugin, and whether listeners heard its wait ran out. */
  private readonly waiting = new Map<string, { since: number; told: boolean }>();
  /** "uid\nresource\nid" of held devices already reported unhealthy on their pod. */
  private readonly warned = new Set<string>();
  private readonly listeners = new Set<() => void>();
  /** The allocation chain: each prepare() starts after the one before settled. */
  private chain: Promise<unknown> = Promise.resolve();
  /** Allocate calls made, and those that failed. */
  private allocateCalls = 0;
  private allocateFailures = 0;

  /** A manager starting from the checkpoint in deps.checkpointDir; a checkpoint that cannot be
   * used is logged, moved aside, and the manager starts empty. */
  static open(deps: DeviceManagerCoreDeps): DeviceManagerCore {
    const read = readCheckpoint(deps.checkpointDir);
    if (read.problem !== undefined)
      deps.logger.error("Device checkpoint not used", {
        dir: deps.checkpointDir,
        error: read.problem,
      });
    return new DeviceManagerCore(deps, read.checkpoint.entries, read.checkpoint.registeredDevices);
  }

  constructor(
    private readonly deps: DeviceManagerCoreDeps,
    entries: readonly CheckpointEntry[] = [],
    registered: Record<string, string[]> = {},
  ) {
    this.waitTimeoutMs = deps.waitTimeoutMs ?? DEFAULT_WAIT_TIMEOUT_MS;
    const gracePeriodMs = deps.gracePeriodMs ?? DEFAULT_GRACE_PERIOD_MS;
    this.podDevices = new PodDevices(entries);
    this.resources = new DeviceResources({
      logger: deps.logger,
      now: () => deps.clock.now(),
      gracePeriodMs,
      known: new Set(deps.knownResources ?? []),
      events: {
        listed: (name, change) => {
          this.warnUnhealthy(name);
          if (change.idsChanged) this.saveQuietly();
          if (change.changed) this.notify();
        },
        endpointChanged: () => this.notify(),
      },
    });
    // Resources of the checkpoint stay at least as long as a pod may wait for their plugin.
    const until = deps.clock.now() + Math.max(gracePeriodMs, this.waitTimeoutMs);
    this.resources.restore(registered, until);
  }

  /** Serves `endpoint`'s resource from now on (a registered plugin, a host device group); an
   * endpoint serving it before is closed, and its end ignored. */
  addEndpoint(endpoint: DevicePluginEndpoint): void {
    this.resources.add(endpoint);
  }

  admit(pod: Pod, active: readonly Pod[]): AdmitFailure | undefined {
    const uid = uidOf(pod);
    const needs = podDeviceNeeds(pod);
    if (Object.keys(needs.total).length === 0 || this.fullyAllocated(uid, needs)) return undefined;
    const others = new Set(active.map(uidOf));
    others.delete(uid);
    for (const name of Object.keys(needs.total).sort()) {
      const n = needs.total[name] ?? 0;
      const status = this.resources.status(name);
      if (status === "unknown") return outOf(name, n);
      if (status === "known") continue;
      const held = this.podDevices.held(name, (u) => others.has(u));
      let free = 0;
      for (const d of status.served.values()) if (d.healthy && !held.has(d.id)) free++;
      const available = Math.max(0, free - this.pendingNeeds(name, others));
      if (n > available) {
        const { reason, message } = unexpected(requestedUnavailable(name, n, available));
        return { reason, message };
      }
    }
    this.admitted.set(uid, needs.total);
    return undefined;
  }

  prepare(pod: Pod, signal?: AbortSignal): Promise<DevicePreparation> {
    // A pod with nothing to allocate never waits behind another pod's plugin calls.
    const uid = uidOf(pod);
    const needs = podDeviceNeeds(pod);
    if (Object.keys(needs.total).length === 0 || this.fullyAllocated(uid, needs))
      return Promise.resolve(this.settle(uid, { state: "ready" }));
    const run = this.chain.then(() => this.prepareNow(pod, signal));
    this.chain = run.catch(() => {});
    return run;
  }

  async containerOptions(
    pod: Pod,
    container: Container,
    signal?: AbortSignal,
  ): Promise<ContainerAllocation | undefined> {
    const entries = this.podDevices.containerEntries(uidOf(pod), container.name);
    if (entries.length === 0) return undefined;
    for (const e of entries) {
      const { endpoint, options } = this.resources.endpointOf(e.resourceName);
      if (endpoint === undefined) {
        if (options?.preStartRequired === false) continue;
        throw new Error(`the device plugin of ${e.resourceName} is not registered`);
      }
      if (!endpoint.options.preStartRequired) continue;
      try {
        await endpoint.preStartContainer(e.deviceIds, signal);
      } catch (err) {
        throw new Error(
          `PreStartContainer of the device plugin of ${e.resourceName} failed for devices ${e.deviceIds.join(",")}: ${(err as Error).message}`,
        );
      }
    }
    return mergeAllocations(entries, (what) =>
      this.deps.logger.warn("Devices of a container conflict; the first is kept", {
        pod: pod.metadata.name,
        container: container.name,
        what,
      }),
    );
  }

  resourceStatus(podUid: string, containerName: string): ApiResourceStatus[] {
    return Object.entries(this.containerDevices(podUid, containerName)).map(([name, ids]) => ({
      name,
      resources: ids.map((resourceID) => ({
        resourceID,
        health: this.resources.health(name, resourceID),
      })),
    }));
  }

  /** Closes every endpoint (the agent stops). */
  close(): void {
    this.resources.closeAll();
  }

  containerDevices(podUid: string, containerName: string): Record<string, string[]> {
    const out: Record<string, string[]> = {};
    for (const e of this.podDevices.containerEntries(podUid, containerName))
      out[e.resourceName] = [...e.deviceIds];
    return out;
  }

  removeStale(activeUids: ReadonlySet<string>): void {
    let freed = false;
    for (const uid of this.podDevices.pods()) {
      if (activeUids.has(uid)) continue;
      this.podDevices.removePod(uid);
      freed = true;
    }
    for (const uid of [...this.admitted.keys()])
      if (!activeUids.has(uid)) this.admitted.delete(uid);
    for (const uid of [...this.waiting.keys()]) if (!activeUids.has(uid)) this.waiting.delete(uid);
    for (const key of [...this.warned])
      if (!activeUids.has(key.split("\n")[0] ?? "")) this.warned.delete(key);
    if (!freed) return;
    this.saveQuietly();
    this.notify();
  }

  capacity(): Record<string, number> {
    return this.resources.counts(false);
  }

  allocatable(): Record<string, number> {
    return this.resources.counts(true);
  }

  stats(): DeviceStats {
    return {
      resources: this.resources.names().map((resourceName) => {
        const devices = this.resources.devices(resourceName);
        return {
          resourceName,
          registered: this.resources.endpointOf(resourceName).endpoint !== undefined,
          devices: devices.size,
          healthy: healthyCount(devices),
          allocated: this.podDevices.held(resourceName, () => true).size,
        };
      }),
      allocations: this.allocateCalls,
      allocationFailures: this.allocateFailures,
    };
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Checks expiries until `signal` aborts (the caller runs registration and host devices). */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      this.checkExpiry();
      await sleepQuietly(this.deps.clock, EXPIRY_CHECK_MS, signal);
    }
  }

  /** One pass of run(): drops resources whose grace period is over, and tells listeners of
   * pods whose wait for a plugin ran out (their next prepare() fails them). */
  checkExpiry(): void {
    const now = this.deps.clock.now();
    const dropped = this.resources.expire(now);
    if (dropped.length > 0) this.saveQuietly();
    let timedOut = false;
    for (const w of this.waiting.values()) {
      if (w.told || now - w.since < this.waitTimeoutMs) continue;
      w.told = true;
      timedOut = true;
    }
    if (dropped.length > 0 || timedOut) this.notify();
  }

  private async prepareNow(pod: Pod, signal?: AbortSignal): Promise<DevicePreparation> {
    signal?.throwIfAborted();
    const uid = uidOf(pod);
    if (this.deps.sourcesReady?.() ?? true)
      this.removeStale(new Set([...this.deps.activePods().map(uidOf), uid]));
    const needs = podDeviceNeeds(pod);
    if (Object.keys(needs.total).length === 0 || this.fullyAllocated(uid, needs))
      return this.settle(uid, { state: "ready" });
    const blocked = checkWaits(this.context(), uid, needs);
    if (blocked?.state === "waiting") return blocked;
    if (blocked !== undefined) return this.settle(uid, blocked);
    const result = await allocatePod(this.context(), pod, needs, signal);
    if (result.state === "ready") this.notify();
    return this.settle(uid, result);
  }

  /** What prepare.ts reads and changes. */
  private context(): PrepareContext {
    return {
      now: () => this.deps.clock.now(),
      logger: this.deps.logger,
      waitTimeoutMs: this.waitTimeoutMs,
      waiting: this.waiting,
      podDevices: this.podDevices,
      status: (name) => this.resources.status(name),
      counted: (failed) => {
        this.allocateCalls++;
        if (failed) this.allocateFailures++;
      },
      save: () => writeCheckpoint(this.deps.checkpointDir, this.snapshot(), this.deps.stateWrites),
    };
  }

  /** A pod whose preparation ended (ready or failed) is no longer admitted-and-waiting. */
  private settle(uid: string, result: DevicePreparation): DevicePreparation {
    this.admitted.delete(uid);
    this.waiting.delete(uid);
    return result;
  }

  /** Whether every container of the pod holds each resource it asks for. */
  private fullyAllocated(uid: string, needs: PodDeviceNeeds): boolean {
    return needs.containers.every((c) =>
      Object.keys(c.resources).every(
        (name) => this.podDevices.ids(uid, c.name, name) !== undefined,
      ),
    );
  }

  /** Devices of `name` that pods in `uids` were admitted for and do not hold yet. */
  private pendingNeeds(name: string, uids: ReadonlySet<string>): number {
    let sum = 0;
    for (const [uid, total] of this.admitted) if (uids.has(uid)) sum += total[name] ?? 0;
    return sum;
  }

  /** One Warning event on each active pod holding a device of `name` that its plugin lists as
   * unhealthy or no longer lists; a device listed healthy again may be reported again later. */
  private warnUnhealthy(name: string): void {
    const devices = this.resources.devices(name);
    let pods: Map<string, Pod> | undefined;
    for (const e of this.podDevices.all()) {
      if (e.resourceName !== name) continue;
      for (const id of e.deviceIds) {
        const key = `${e.podUid}\n${name}\n${id}`;
        const device = devices.get(id);
        if (device?.healthy) {
          this.warned.delete(key);
          continue;
        }
        if (this.warned.has(key)) continue;
        pods ??= new Map(this.deps.activePods().map((p) => [uidOf(p), p]));
        const pod = pods.get(e.podUid);
        if (pod === undefined) continue;
        this.warned.add(key);
        const what = device === undefined ? "is no longer listed by its plugin" : "is unhealthy";
        const message = `Device ${id} of ${name} ${what}; the pod keeps it until it ends`;
        this.deps.event(pod, "Warning", "DeviceUnhealthy", message);
      }
    }
  }

  private snapshot() {
    return {
      entries: this.podDevices.all(),
      registeredDevices: this.resources.registeredDevices(),
    };
  }

  private saveQuietly(): void {
    try {
      writeCheckpoint(this.deps.checkpointDir, this.snapshot(), this.deps.stateWrites);
    } catch (err) {
      this.deps.logger.error("Cannot write the device checkpoint", {
        dir: this.deps.checkpointDir,
        error: err,
      });
    }
  }

  private notify(): void {
    for (const listener of [...this.listeners]) {
      try {
        listener();
      } catch (err) {
        this.deps.logger.error("A device change listener failed", { error: err });
      }
    }
  }
}
