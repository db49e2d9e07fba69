// The pod sync steps as a class (see index.ts): what it remembers of each pod between syncs, the
// status reads, the status publication, and the three steps the pod workers call.
//
// While a sync pulls a container's image, the pull's figures are the container's waiting
// message; the status is published again for them at most every PULL_PROGRESS_PUBLISH_MS (from
// the status the sync planned from), and the sync's own publication at its end replaces them.
import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { getPodQOS } from "../../api/index.ts";
import type { PodStatus as ApiPodStatus, Pod } from "../../api/types.ts";
import type { PodStatus, RunningPod, SyncChanges } from "../kubecontainer/types.ts";
import type { KillOptions, UpdateType } from "../podworkers/index.ts";
import type { SyncError } from "../status/index.ts";
import { generatePodStatus, toRFC3339 } from "../status/index.ts";
import type { DevicePreparation, PodSync, PodSyncDeps, SyncOptions } from "./index.ts";

const uidOf = (pod: Pod) => pod.metadata.uid as string;

/** The status of a pod the runtime has nothing of. */
function emptyStatus(pod: Pod, now: number): PodStatus {
  const { uid = "", name, namespace = "default" } = pod.metadata;
  return { uid, name, namespace, ips: [], sandboxes: [], containers: [], timestamp: now };
}

function sameWaiting(
  a: ReadonlyMap<string, SyncError> | undefined,
  b: ReadonlyMap<string, SyncError>,
): boolean {
  if (a === undefined || a.size !== b.size) return false;
  for (const [name, e] of b) {
    const o = a.get(name);
    if (o?.reason !== e.reason || o.message !== e.message) return false;
  }
  return true;
}

type StatusFlags = { terminating?: boolean; terminal?: boolean; kill?: KillOptions };

/** How often at most a pod's status is published again while its pulls run. */
const PULL_PROGRESS_PUBLISH_MS = 5000;

/** The reason a container waiting for its image shows (the status manager's default for a
 * container never created). */
function pullingReason(pod: Pod): string {
  return (pod.spec.initContainers?.length ?? 0) > 0 ? "PodInitializing" : "ContainerCreating";
}

export class PodSyncer implements PodSync {
  /** The last sync's waiting reasons per pod, by container name. */
  private readonly errors = new Map<string, ReadonlyMap<string, SyncError>>();
  /** Pods whose last sync waited for a device plugin to register. */
  private readonly devicesWaiting = new Set<string>();
  /** When a sync last let the runtime act on the pod (monotonic ms, as the cache's times). */
  private readonly lastActed = new Map<string, number>();
  /** Pods a sync is acting on; each such sync reads the pod's status when done. */
  private readonly acting = new Set<string>();
  /** Per pod: the status its last sync read after acting, when that sync's plan for it was
   * empty. */
  private readonly settledStatus = new Map<string, PodStatus>();
  /** Per pod, while its sync pulls: each pulling container's waiting state (its figures),
   * shown over the last sync's reason. */
  private readonly pulling = new Map<string, Map<string, SyncError>>();
  /** Per pod, while its sync pulls: when the status was last published for the figures
   * (monotonic ms). */
  private readonly pullPublishedAt = new Map<string, number>();

  constructor(private readonly deps: PodSyncDeps) {}

  podDir(uid: string): string {
    return join(this.deps.rootDir, "pods", uid);
  }

  syncErrors(uid: string): ReadonlyMap<string, SyncError> | undefined {
    return this.errors.get(uid);
  }

  waitingForDevices(): string[] {
    return [...this.devicesWaiting];
  }

  readPending(uid: string): boolean {
    return this.acting.has(uid);
  }

  settled(uid: string, status: PodStatus): boolean {
    return this.settledStatus.get(uid) === status;
  }

  async syncPod(pod: Pod, _type: UpdateType, signal?: AbortSignal) {
    const before = await this.statusForSync(pod);
    const status = this.publish(pod, before);
    if (status.phase === "Succeeded" || status.phase === "Failed") return { terminal: true };
    await this.prepare(pod, before, signal);
    // kubelet's WaitForAttachAndMount: no sandbox and no container before the volumes are
    // there; the pod waits in ContainerCreating and is synced again (at once when an object
    // it reads appears).
    const running = before.sandboxes.length > 0 || before.containers.length > 0;
    const volumes = await this.deps.volumes?.mountPod(pod, running);
    if (volumes && !volumes.ready) return { terminal: false, retry: true };
    const devices = await this.deps.devices?.prepare(pod, signal);
    this.devicesWaiting.delete(uidOf(pod));
    if (devices !== undefined && devices.state !== "ready")
      return this.devicesNotReady(pod, before, devices, running);
    return this.syncRuntime(pod, before, this.syncOptions(uidOf(pod), signal));
  }

  async syncTerminatingPod(pod: Pod, gracePeriodSeconds: number, kill: KillOptions) {
    const uid = uidOf(pod);
    this.acting.add(uid);
    try {
      const running = await this.runningPodOf(pod);
      const terminal = !this.deps.isDesired(uid) || kill.reason !== undefined;
      this.publish(pod, await this.readStatus(pod), { terminating: true, terminal, kill });
      this.lastActed.set(uid, this.deps.clock.monotonic());
      await this.deps.runtime.killPod(pod, running, gracePeriodSeconds);
      this.publish(pod, await this.readStatus(pod), { terminating: true, terminal: true, kill });
    } finally {
      this.acting.delete(uid);
    }
  }

  async syncTerminatedPod(pod: Pod, kill: KillOptions) {
    const { deps } = this;
    const uid = uidOf(pod);
    const desired = deps.isDesired(uid);
    if (desired && !kill.evict) {
      // A finished pod keeps its containers for logs and status; its tmpfs volumes go, as the
      // kubelet tears down the volumes of terminated pods.
      await deps.volumes?.unmountPod(uid);
      return;
    }
    // An evicted pod does not (the kubelet's ShouldPodContentBeRemoved): its writable layers,
    // logs and volumes go although its manifest is still there.
    const running = await this.runningPodOf(pod);
    await deps.runtime.removePod(running);
    await deps.podCgroups
      ?.remove(uid)
      .catch((error) => deps.logger.warn("could not remove a pod cgroup", { uid, error }));
    if (deps.volumes) await deps.volumes.removePod(uid);
    else await rm(this.podDir(uid), { recursive: true, force: true });
    this.errors.delete(uid);
    this.lastActed.delete(uid);
    this.settledStatus.delete(uid);
    deps.updateCache(uid, emptyStatus(pod, deps.clock.monotonic()));
    if (!desired) deps.statusManager.removePod(uid);
  }

  reject(pod: Pod, reason: string, message: string): void {
    // The kubelet's rejectPod: only phase, reason and message (no container statuses, so
    // `get pods` shows the reason), the message prefixed as the kubelet prefixes it.
    this.deps.statusManager.setPodStatus(uidOf(pod), {
      phase: "Failed",
      reason,
      message: `Pod was rejected: ${message}`,
      qosClass: getPodQOS(pod),
      startTime: toRFC3339(this.deps.clock.now()),
    });
  }

  /** A pod that cannot have its devices ends Failed, as the kubelet's admission rejects it,
   * unless it runs already; one whose device plugin has not registered yet waits, Pending, each container waiting with the
   * reason, and is synced again (at once when the devices appear). */
  private devicesNotReady(
    pod: Pod,
    before: PodStatus,
    devices: Exclude<DevicePreparation, { state: "ready" }>,
    running: boolean,
  ): { terminal: boolean; retry?: boolean } {
    const { reason, message } = devices;
    const uid = uidOf(pod);
    // A pod already running (its devices forgotten: a checkpoint lost) is never failed for them:
    // it goes on, and waits for its plugin like a pod at boot.
    if (devices.state === "failed" && !running) {
      this.deps.logger.warn("pod failed: its devices cannot be allocated", {
        pod: pod.metadata.name,
        reason,
        message,
      });
      this.deps.event?.(pod, "Warning", reason, message);
      this.reject(pod, reason, message);
      return { terminal: true };
    }
    this.devicesWaiting.add(uid);
    const containers = [...(pod.spec.initContainers ?? []), ...pod.spec.containers];
    const waiting = new Map(containers.map((c) => [c.name, { reason, message }]));
    if (!sameWaiting(this.errors.get(uid), waiting)) {
      this.deps.event?.(pod, "Warning", reason, message);
      this.errors.set(uid, waiting);
      this.publish(pod, before);
    }
    return { terminal: false, retry: true };
  }

  /** A new pod's folder and cgroup, in the order pods start in when it has no sandbox yet. */
  private async prepare(pod: Pod, before: PodStatus, signal?: AbortSignal): Promise<void> {
    const prepare = async () => {
      await mkdir(this.podDir(uidOf(pod)), { recursive: true, mode: 0o750 });
      await this.deps.podCgroups?.ensure(pod).catch((err: Error) => {
        throw new Error(
          `Cannot create the cgroup of pod ${JSON.stringify(pod.metadata.name)}: ${err.message}`,
        );
      });
    };
    if (before.sandboxes.length === 0 && this.deps.prepareInTurn)
      await this.deps.prepareInTurn(pod, prepare, signal);
    else await prepare();
  }

  private syncOptions(uid: string, signal?: AbortSignal): SyncOptions {
    const livenessFailed = this.deps.livenessFailed?.(uid);
    const startupFailed = this.deps.startupFailed?.(uid);
    return {
      ...(livenessFailed ? { livenessFailed } : {}),
      ...(startupFailed ? { startupFailed } : {}),
      ...(signal ? { signal } : {}),
    };
  }

  /** Has the runtime manager carry out its plan for the pod, then reads and publishes the
   * status again when it acted (or its waiting reasons changed). */
  private async syncRuntime(pod: Pod, before: PodStatus, opts: SyncOptions) {
    const { deps } = this;
    const uid = uidOf(pod);
    const acts = deps.hasActions?.(pod, before, opts) ?? true;
    if (acts) {
      this.lastActed.set(uid, deps.clock.monotonic());
      this.acting.add(uid);
    }
    const onPullProgress = (container: string, message: string) =>
      this.showPullProgress(pod, before, container, message);
    try {
      const result = await deps.runtime.syncPod(pod, before, { ...opts, onPullProgress });
      this.endPullProgress(uid);
      // Cancelled by a kill: the terminating step reads and publishes the pod next.
      if (opts.signal?.aborted) return { terminal: false };
      const unchanged = sameWaiting(this.errors.get(uid), result.waiting);
      this.errors.set(uid, result.waiting);
      const retry = result.waiting.size > 0;
      if (!acts && unchanged) return { terminal: false, retry };
      const read = acts ? await this.readStatusAfter(before, result.changes) : before;
      if (acts && !(deps.hasActions?.(pod, read, opts) ?? true)) this.settledStatus.set(uid, read);
      else this.settledStatus.delete(uid);
      const after = this.publish(pod, read);
      return { terminal: after.phase === "Succeeded" || after.phase === "Failed", retry };
    } finally {
      this.acting.delete(uid);
      this.endPullProgress(uid);
    }
  }

  /** Shows a pulling container's figures, publishing the status again unless it was published
   * for them less than PULL_PROGRESS_PUBLISH_MS ago. */
  private showPullProgress(pod: Pod, before: PodStatus, container: string, message: string) {
    const uid = uidOf(pod);
    const shown = this.pulling.get(uid) ?? new Map<string, SyncError>();
    shown.set(container, { reason: pullingReason(pod), message });
    this.pulling.set(uid, shown);
    const now = this.deps.clock.monotonic();
    const last = this.pullPublishedAt.get(uid);
    if (last !== undefined && now - last < PULL_PROGRESS_PUBLISH_MS) return;
    this.pullPublishedAt.set(uid, now);
    this.publish(pod, before);
  }

  private endPullProgress(uid: string): void {
    this.pulling.delete(uid);
    this.pullPublishedAt.delete(uid);
  }

  /** The waiting states to show: the last sync's, with the figures of pulls running over them. */
  private waitingOf(uid: string): ReadonlyMap<string, SyncError> | undefined {
    const pulling = this.pulling.get(uid);
    if (pulling === undefined) return this.errors.get(uid);
    return new Map([...(this.errors.get(uid) ?? []), ...pulling]);
  }

  private async readStatus(pod: Pod): Promise<PodStatus> {
    const { name, namespace = "default" } = pod.metadata;
    const status = await this.deps.runtime.getPodStatus(uidOf(pod), name, namespace);
    this.deps.updateCache(uidOf(pod), status);
    return status;
  }

  /** The status after a sync that acted, read with the fewest calls. */
  private async readStatusAfter(before: PodStatus, changes: SyncChanges): Promise<PodStatus> {
    const status = await this.deps.runtime.getPodStatusAfter(before, changes);
    this.deps.updateCache(before.uid, status);
    return status;
  }

  /** The status to plan from: the PLEG cache's when it is newer than our last action on the
   * pod (none for a pod never seen in the runtime and never acted on), else a fresh read. */
  private async statusForSync(pod: Pod): Promise<PodStatus> {
    const uid = uidOf(pod);
    if (this.deps.cachedStatus === undefined) return this.readStatus(pod);
    const entry = this.deps.cachedStatus(uid);
    const acted = this.lastActed.get(uid);
    if (entry === undefined && acted === undefined)
      return emptyStatus(pod, this.deps.clock.monotonic());
    if (entry !== undefined && entry.error === undefined && entry.timestamp >= (acted ?? 0)) {
      return entry.status ?? emptyStatus(pod, entry.timestamp);
    }
    return this.readStatus(pod);
  }

  /** Generates the pod's API status from the runtime's and publishes it (status manager). */
  private publish(pod: Pod, runtime: PodStatus, extra: StatusFlags = {}): ApiPodStatus {
    const { deps } = this;
    const uid = uidOf(pod);
    const { kill, ...flags } = extra;
    const status = generatePodStatus({
      pod,
      runtime,
      now: deps.clock.now(),
      hostIP: deps.hostIP(),
      syncErrors: this.waitingOf(uid),
      previous: deps.statusManager.getPodStatus(uid),
      ...(deps.readiness ? { readiness: deps.readiness } : {}),
      ...(deps.startup ? { startup: deps.startup } : {}),
      ...flags,
      // An eviction's status (the kubelet's podStatusFn): Failed, its reason and message.
      ...(kill?.evict && kill.reason !== undefined
        ? { failure: { reason: kill.reason, message: kill.message ?? "" } }
        : {}),
      ...(kill?.conditions ? { extraConditions: kill.conditions } : {}),
    });
    const withDevices = this.withDevices(uid, status);
    deps.statusManager.setPodStatus(uid, withDevices);
    return withDevices;
  }

  /** The status with the devices each container holds (allocatedResourcesStatus). */
  private withDevices(uid: string, status: ApiPodStatus): ApiPodStatus {
    const devices = this.deps.devices;
    if (devices === undefined) return status;
    const add = (list: ApiPodStatus["containerStatuses"]) =>
      list?.map((c) => {
        const held = devices.resourceStatus(uid, c.name);
        return held.length > 0 ? { ...c, allocatedResourcesStatus: held } : c;
      });
    const init = add(status.initContainerStatuses);
    const app = add(status.containerStatuses);
    return {
      ...status,
      ...(init && { initContainerStatuses: init }),
      ...(app && { containerStatuses: app }),
    };
  }

  private async runningPodOf(pod: Pod): Promise<RunningPod> {
    const uid = uidOf(pod);
    const found = (await this.deps.runtime.getPods()).find((p) => p.uid === uid);
    return (
      found ?? {
        uid,
        name: pod.metadata.name,
        namespace: pod.metadata.namespace ?? "default",
        sandboxes: [],
        containers: [],
      }
    );
  }
}
