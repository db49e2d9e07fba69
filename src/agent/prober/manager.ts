// The prober manager (kubelet's prober_manager): one worker per (pod, container, probe kind),
// for the running instance of the container. It is driven by the statuses the agent publishes:
// updatePod() starts a worker when a container with a probe is seen running under a new ID and
// stops it when the container stops, is replaced, or the pod ends; removePod() stops them all.
// Settled results go to the results manager; every change is passed to `onResult`, which the
// agent wires to a pod sync (a probe never restarts a container itself).
//
// Invariants: at most one worker per key; a stopped worker's results are removed; while a pod
// terminates only readiness workers run.

import type {
  PodStatus as ApiPodStatus,
  Container,
  ContainerStatus,
  Pod,
} from "../../api/types.ts";
import { type Clock, monotonicOf, untilAborted } from "../../util/clock.ts";
import { type Logger, nullLogger } from "../../util/log.ts";
import type { ProbeResults } from "../status/index.ts";
import { runProbe } from "./prober.ts";
import { createResultsManager, type ResultChange, type ResultsManager } from "./results.ts";
import { createDelayStats, type DelayStats, type ProbeStats } from "./stats.ts";
import {
  type ContainerEventFn,
  PROBE_KINDS,
  type ProbeHandlerFn,
  type ProbeKind,
  probeSpec,
} from "./types.ts";
import { ProbeWorker, type WorkerDeps } from "./worker.ts";

export interface ProberManagerDeps {
  clock: Clock;
  logger?: Logger;
  handler: ProbeHandlerFn;
  event: ContainerEventFn;
  /** Is termination of the pod requested? */
  isTerminating(uid: string): boolean;
  /** Called for every settled change of a result (not for removals). */
  onResult(change: ResultChange): void;
  /** In [0, 1); Math.random by default. */
  random?: () => number;
  /** See runProbe's hard limit. */
  hardLimitMs?: number;
}

export interface ProberManager {
  /** Starts and stops the pod's workers to match the containers running in `status`. */
  updatePod(pod: Pod, status: ApiPodStatus): void;
  /** Stops every worker of the pod (it is gone). */
  removePod(uid: string): void;
  /** Readiness results for the status generator (true: ready). */
  readiness: ProbeResults;
  /** Startup results for the status generator (true: started). */
  startup: ProbeResults;
  /** IDs of the pod's containers whose liveness (or startup) probe settled on failure. */
  failed(kind: "liveness" | "startup", uid: string): ReadonlySet<string>;
  /** The worker for a key, if running (tests drive its doProbe()). */
  worker(uid: string, container: string, kind: ProbeKind): ProbeWorker | undefined;
  /** How many workers run. */
  size(): number;
  stats(): ProbeStats;
  /** Lets workers loop until `signal` aborts, then stops them all. Before run(), workers are
   * created but do not loop (tests call doProbe()). */
  run(signal: AbortSignal): Promise<void>;
}

const keyOf = (uid: string, name: string, kind: ProbeKind) => `${uid}/${name}/${kind}`;

/** Containers that can be probed: app containers and sidecars (restartable init containers). */
function probedContainers(pod: Pod, status: ApiPodStatus) {
  const out: { container: Container; status: ContainerStatus | undefined }[] = [];
  for (const c of pod.spec.containers) {
    out.push({ container: c, status: status.containerStatuses?.find((s) => s.name === c.name) });
  }
  for (const c of pod.spec.initContainers ?? []) {
    if (c.restartPolicy !== "Always") continue;
    const s = status.initContainerStatuses?.find((x) => x.name === c.name);
    out.push({ container: c, status: s });
  }
  return out;
}

const rawId = (id: string) => id.slice(id.indexOf("://") + 3);

export function createProberManager(deps: ProberManagerDeps): ProberManager {
  return new Prober(deps);
}

class Prober implements ProberManager {
  private readonly log: Logger;
  /** The running workers by key (keyOf); at most one per key. */
  private readonly workers = new Map<string, ProbeWorker>();
  /** Pod uid → the keys of its workers. */
  private readonly byPod = new Map<string, Set<string>>();
  private readonly delays: DelayStats = createDelayStats();
  /** When the manager started (monotonic ms). */
  private readonly startedAt: number;
  /** Whether run() is under way: a worker started then loops at once. */
  private running = false;
  private readonly results: ResultsManager;
  /** Runs one probe and counts its result. */
  private readonly probe: WorkerDeps["probe"];

  constructor(private readonly deps: ProberManagerDeps) {
    this.log = deps.logger ?? nullLogger;
    this.startedAt = deps.clock.monotonic();
    this.results = createResultsManager(
      (change) => this.passOn(change),
      (error, change) =>
        this.log.error("a probe result could not be passed on; it is kept", {
          probe: change.kind,
          container: change.containerId,
          result: change.result ?? "removed",
          error,
        }),
    );
    const proberDeps = {
      clock: deps.clock,
      handler: deps.handler,
      event: deps.event,
      ...(deps.hardLimitMs !== undefined ? { hardLimitMs: deps.hardLimitMs } : {}),
    };
    this.probe = async (kind, p, target, moot) => {
      const outcome = await runProbe(proberDeps, kind, p, target, moot);
      this.delays.count(kind, outcome.result);
      return outcome;
    };
  }

  readonly readiness: ProbeResults = (id) => {
    const r = this.results.get("readiness", id);
    return r === undefined ? undefined : r === "success";
  };

  readonly startup: ProbeResults = (id) => {
    const r = this.results.get("startup", id);
    return r === undefined ? undefined : r === "success";
  };

  updatePod(pod: Pod, status: ApiPodStatus): void {
    const uid = pod.metadata.uid as string;
    const ended = status.phase === "Succeeded" || status.phase === "Failed";
    const terminating = this.deps.isTerminating(uid);
    for (const { container, status: s } of probedContainers(pod, status)) {
      for (const kind of PROBE_KINDS) {
        if (probeSpec(container, kind) === undefined) continue;
        const live = !ended && s?.state.running !== undefined && s.containerID;
        if (!live || (terminating && kind !== "readiness")) {
          this.stopFor(uid, container.name, kind, terminating);
          continue;
        }
        this.ensureWorker(pod, status, container, s, kind);
      }
    }
  }

  removePod(uid: string): void {
    for (const key of [...(this.byPod.get(uid) ?? [])]) this.stop(key);
  }

  failed(kind: "liveness" | "startup", uid: string): ReadonlySet<string> {
    return this.results.matching(kind, uid, "failure");
  }

  worker(uid: string, container: string, kind: ProbeKind): ProbeWorker | undefined {
    return this.workers.get(keyOf(uid, container, kind));
  }

  size(): number {
    return this.workers.size;
  }

  stats(): ProbeStats {
    return this.delays.snapshot();
  }

  async run(signal: AbortSignal): Promise<void> {
    this.running = true;
    for (const [key, w] of this.workers) this.loop(key, w);
    await untilAborted(signal);
    this.running = false;
    for (const key of [...this.workers.keys()]) this.stop(key);
  }

  /** A startup probe that succeeded wakes the container's other workers; every change goes on. */
  private passOn(change: ResultChange): void {
    if (change.kind === "startup" && change.result === "success") {
      for (const key of this.byPod.get(change.podUid) ?? []) {
        const w = this.workers.get(key);
        if (w && w.kind !== "startup" && w.containerId === change.containerId) w.trigger();
      }
    }
    this.deps.onResult(change);
  }

  /** Stops the worker of a container that is not running (or of a terminating pod, where a
   * liveness or startup worker leaves a success behind). */
  private stopFor(uid: string, name: string, kind: ProbeKind, terminating: boolean): void {
    const key = keyOf(uid, name, kind);
    const current = this.workers.get(key);
    this.stop(key);
    if (current && terminating && kind !== "readiness") {
      this.results.set(kind, current.containerId, uid, "success");
    }
  }

  /** Starts a worker for the running container unless one probes this instance already. */
  private ensureWorker(
    pod: Pod,
    status: ApiPodStatus,
    container: Container,
    s: ContainerStatus,
    kind: ProbeKind,
  ): void {
    const key = keyOf(pod.metadata.uid as string, container.name, kind);
    const id = rawId(s.containerID as string);
    if (this.workers.get(key)?.containerId === id) return;
    this.stop(key);
    const host = pod.spec.hostNetwork ? "127.0.0.1" : (status.podIP ?? "");
    this.start(key, this.newWorker(pod, container, s, kind, host));
    this.log.debug("probe worker started", {
      pod: pod.metadata.name,
      container: container.name,
      kind,
      id,
    });
  }

  private start(key: string, w: ProbeWorker): void {
    this.workers.set(key, w);
    let keys = this.byPod.get(w.spec.podUid);
    if (keys === undefined) {
      keys = new Set();
      this.byPod.set(w.spec.podUid, keys);
    }
    keys.add(key);
    if (this.running) this.loop(key, w);
  }

  /** Drops the worker from the tables (its results stay). */
  private forget(key: string, w: ProbeWorker): void {
    if (this.workers.get(key) !== w) return;
    this.workers.delete(key);
    const uid = w.spec.podUid;
    this.byPod.get(uid)?.delete(key);
    if (this.byPod.get(uid)?.size === 0) this.byPod.delete(uid);
  }

  /** A worker whose loop ended by itself (pod terminating) keeps its last result. */
  private loop(key: string, w: ProbeWorker): void {
    void w.run().finally(() => this.forget(key, w));
  }

  private stop(key: string): void {
    const w = this.workers.get(key);
    if (w === undefined) return;
    w.stop();
    this.forget(key, w);
  }

  private newWorker(
    pod: Pod,
    c: Container,
    s: ContainerStatus,
    kind: ProbeKind,
    host: string,
  ): ProbeWorker {
    const uid = pod.metadata.uid as string;
    const containerId = rawId(s.containerID as string);
    const started = Date.parse(s.state.running?.startedAt ?? "");
    const { deps, results, log } = this;
    return new ProbeWorker(
      {
        clock: deps.clock,
        random: deps.random ?? Math.random,
        results,
        probe: this.probe,
        isStarted: (id) => !c.startupProbe || results.get("startup", id) === "success",
        isTerminating: () => deps.isTerminating(uid),
        managerStartedAt: this.startedAt,
        recordDelay: (ms) => this.delays.add(ms),
        reportError: (error) =>
          log.error("probe worker failed; it probes again at its next period", {
            pod: `${pod.metadata.namespace}/${pod.metadata.name}`,
            container: c.name,
            probe: kind,
            error,
          }),
      },
      {
        kind,
        probe: probeSpec(c, kind) as NonNullable<ReturnType<typeof probeSpec>>,
        podUid: uid,
        startedAt: Number.isNaN(started)
          ? deps.clock.monotonic()
          : monotonicOf(deps.clock, started),
        target: { pod, container: c, containerId, host },
      },
    );
  }
}
