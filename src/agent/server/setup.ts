// The local API's view of the agent: pods from the pod manager with statuses from the status
// manager, logs by kubelet's layout, exec through CRI, health and metrics.
import type { Node } from "../../api/node.ts";
import type { Pod, PodStatus } from "../../api/types.ts";
import type { CriRuntime } from "../../cri/index.ts";
import { deepFreeze } from "../../util/freeze.ts";
import type { AgentConfig } from "../config/index.ts";
import type { EventRecorder } from "../events/index.ts";
import { type EvictionMetricsSource, registerEvictionMetrics } from "../eviction/metrics.ts";
import type { NodePsi } from "../eviction/psi.ts";
import type { RuntimeHealth } from "../kuberuntime/health.ts";
import { containerLogPath } from "../logs/index.ts";
import type { RelistStats } from "../pleg/index.ts";
import type { PodManager } from "../podmanager/index.ts";
import { registerProbeMetrics } from "../prober/metrics.ts";
import type { ProbeStats } from "../prober/stats.ts";
import type { StatusManager } from "../status/index.ts";
import { podDisplayStatus } from "../status/index.ts";
import { createMetricsRegistry, type ServerDeps } from "./index.ts";

export interface ServerDepsInput {
  config: AgentConfig;
  pods: Pick<PodManager, "visiblePods" | "podByFullName">;
  /** Whether the worker of a pod its source removed may still be stopping it. */
  stillStopping(uid: string): boolean;
  statusManager: StatusManager;
  recorder: EventRecorder;
  cri: Pick<CriRuntime, "execSync">;
  health: RuntimeHealth;
  /** PLEG's relist durations. */
  relistStats: () => RelistStats;
  /** Probe runs and delays. */
  probeStats?: () => ProbeStats;
  /** The node as last built by the node status manager. */
  node?: () => Node;
  /** Evictions and pressure (the eviction manager), and the node's PSI. */
  eviction?: { manager: EvictionMetricsSource; psi: () => NodePsi };
}

const PENDING: PodStatus = deepFreeze({ phase: "Pending" });

/**
 * The API's view of each pod: while neither the pod (frozen by the pod config) nor its status
 * (frozen by the status manager) changes, the same frozen object, so that its JSON is made once
 * (see server/frozen-json.ts) however often a client polls.
 */
export class PodViews {
  /** The last view of each pod object, with the status it was made with. */
  private readonly views = new WeakMap<Pod, { status: PodStatus | undefined; view: Pod }>();

  constructor(private readonly statusManager: Pick<StatusManager, "getPodStatus">) {}

  view(pod: Pod): Pod {
    const status = this.statusManager.getPodStatus(pod.metadata.uid as string);
    const last = this.views.get(pod);
    if (last !== undefined && last.status === status) return last.view;
    const view = Object.freeze({
      ...pod,
      apiVersion: "v1",
      kind: "Pod",
      status: status ?? PENDING,
    });
    this.views.set(pod, { status, view });
    return view;
  }
}

export function createServerDeps(input: ServerDepsInput): ServerDeps {
  const { pods, statusManager, recorder, config, health } = input;
  const metrics = createMetricsRegistry();
  const podsGauge = metrics.gauge("fleetlet_pods", "Pods the agent knows, by phase.", ["phase"]);
  const restarts = metrics.gauge("fleetlet_container_restarts", "Container restarts, by pod.", [
    "namespace",
    "pod",
  ]);
  const runtimeUp = metrics.gauge(
    "fleetlet_runtime_healthy",
    "1 when the container runtime is usable.",
  );
  const eventsDropped = metrics.gauge(
    "fleetlet_events_dropped",
    "Events dropped because the ring was full.",
  );
  const relistLast = metrics.gauge(
    "fleetlet_pleg_relist_duration_seconds",
    "Duration of the last PLEG relist.",
  );
  const relistCount = metrics.counter("fleetlet_pleg_relists_total", "PLEG relists completed.");
  const relistSum = metrics.counter(
    "fleetlet_pleg_relist_seconds_total",
    "Time spent in completed PLEG relists.",
  );
  const containerEvents = metrics.counter(
    "fleetlet_pleg_container_events_total",
    "Container events received from the runtime's event stream.",
  );
  const eventRelists = metrics.counter(
    "fleetlet_pleg_event_relists_total",
    "Container events that made the PLEG relist at once (exits, OOM kills, removals).",
  );
  // The process's own figures, under Prometheus' standard names, and its JavaScript heap.
  const rss = metrics.gauge("process_resident_memory_bytes", "Resident memory size in bytes.");
  const cpu = metrics.counter(
    "process_cpu_seconds_total",
    "Total user and system CPU time spent in seconds.",
  );
  const heap = metrics.gauge(
    "fleetlet_js_heap_bytes",
    "Bytes the JavaScript heap holds: live objects and garbage not yet collected.",
  );
  if (input.probeStats) registerProbeMetrics(metrics, input.probeStats);
  if (input.eviction) registerEvictionMetrics(metrics, input.eviction.manager, input.eviction.psi);
  const views = new PodViews(statusManager);
  const listPods = () => pods.visiblePods(input.stillStopping).map((p) => views.view(p));
  metrics.onCollect(() => {
    podsGauge.reset();
    restarts.reset();
    const byPhase = new Map<string, number>();
    for (const pod of listPods()) {
      const phase = pod.status?.phase ?? "Pending";
      byPhase.set(phase, (byPhase.get(phase) ?? 0) + 1);
      const labels = { namespace: pod.metadata.namespace ?? "default", pod: pod.metadata.name };
      restarts.set(labels, podDisplayStatus(pod).restarts);
    }
    for (const [phase, n] of byPhase) podsGauge.set({ phase }, n);
    runtimeUp.set({}, health.healthy() ? 1 : 0);
    eventsDropped.set({}, recorder.dropped);
    const relist = input.relistStats();
    if (relist.lastMs !== undefined) relistLast.set({}, relist.lastMs / 1000);
    relistCount.inc({}, relist.count - relistCount.get());
    relistSum.inc({}, Math.max(0, relist.totalMs / 1000 - relistSum.get()));
    containerEvents.inc({}, relist.events - containerEvents.get());
    eventRelists.inc({}, relist.eventRelists - eventRelists.get());
    const memory = process.memoryUsage();
    rss.set({}, memory.rss);
    heap.set({}, memory.heapUsed);
    const used = process.cpuUsage();
    cpu.inc({}, Math.max(0, (used.user + used.system) / 1e6 - cpu.get()));
  });

  return {
    listPods,
    onPodsChanged: (listener) => statusManager.subscribe(() => listener()),
    getPod: (namespace, name) => {
      // A wanted pod first, then one its source removed that is still stopping.
      const pod = pods.podByFullName(namespace, name);
      if (pod !== undefined) return views.view(pod);
      return listPods().find(
        (p) => p.metadata.name === name && (p.metadata.namespace ?? "default") === namespace,
      );
    },
    logPath: (pod, container, previous) =>
      containerLogPath(config.podLogsDir, pod, container, previous),
    async exec(pod, container, cmd, timeoutSec) {
      const statuses = [
        ...(pod.status?.containerStatuses ?? []),
        ...(pod.status?.initContainerStatuses ?? []),
      ];
      const status = statuses.find((s) => s.name === container);
      if (status?.containerID === undefined || status.state?.running === undefined) {
        throw new Error(`container ${container} of pod ${pod.metadata.name} is not running`);
      }
      const containerId = status.containerID.replace(/^[a-z]+:\/\//, "");
      const res = await input.cri.execSync({ containerId, cmd, timeout: timeoutSec });
      const text = new TextDecoder();
      return {
        stdout: text.decode(res.stdout),
        stderr: text.decode(res.stderr),
        exitCode: res.exitCode,
      };
    },
    events: () => recorder.list(),
    healthy: () => {
      const reasons = health.reasons();
      return { ok: reasons.length === 0, reasons };
    },
    metrics: () => metrics.render(),
    ...(input.node !== undefined && { node: input.node }),
  };
}
