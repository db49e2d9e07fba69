// The agent's own metrics on /metrics: pods by phase and their restarts, the runtime's health,
// dropped events, PLEG relists, and the process's memory and CPU. Their figures are read when the
// metrics are collected.
import type { Pod } from "../../api/types.ts";
import type { RelistStats } from "../pleg/index.ts";
import { podDisplayStatus } from "../status/index.ts";
import type { Counter, Gauge, MetricsRegistry } from "./metrics.ts";

export interface AgentMetricsSources {
  /** The pods the API shows, with their statuses. */
  pods(): Pod[];
  /** Whether the container runtime is usable. */
  runtimeHealthy(): boolean;
  /** Events dropped because the ring was full. */
  eventsDropped(): number;
  /** PLEG's relist durations. */
  relistStats(): RelistStats;
}

function podGauges(metrics: MetricsRegistry) {
  return {
    pods: metrics.gauge("fleetlet_pods", "Pods the agent knows, by phase.", ["phase"]),
    restarts: metrics.gauge("fleetlet_container_restarts", "Container restarts, by pod.", [
      "namespace",
      "pod",
    ]),
    runtimeUp: metrics.gauge("fleetlet_runtime_healthy", "1 when the container runtime is usable."),
    eventsDropped: metrics.gauge(
      "fleetlet_events_dropped",
      "Events dropped because the ring was full.",
    ),
  };
}

function plegMetrics(metrics: MetricsRegistry) {
  return {
    last: metrics.gauge(
      "fleetlet_pleg_relist_duration_seconds",
      "Duration of the last PLEG relist.",
    ),
    count: metrics.counter("fleetlet_pleg_relists_total", "PLEG relists completed."),
    sum: metrics.counter(
      "fleetlet_pleg_relist_seconds_total",
      "Time spent in completed PLEG relists.",
    ),
    containerEvents: metrics.counter(
      "fleetlet_pleg_container_events_total",
      "Container events received from the runtime's event stream.",
    ),
    eventRelists: metrics.counter(
      "fleetlet_pleg_event_relists_total",
      "Container events that made the PLEG relist at once (exits, OOM kills, removals).",
    ),
  };
}

/** The process's own figures, under Prometheus' standard names, and its JavaScript heap. */
function processMetrics(metrics: MetricsRegistry) {
  return {
    rss: metrics.gauge("process_resident_memory_bytes", "Resident memory size in bytes."),
    cpu: metrics.counter(
      "process_cpu_seconds_total",
      "Total user and system CPU time spent in seconds.",
    ),
    heap: metrics.gauge(
      "fleetlet_js_heap_bytes",
      "Bytes the JavaScript heap holds: live objects and garbage not yet collected.",
    ),
  };
}

function collectPods(g: { pods: Gauge; restarts: Gauge }, pods: Pod[]): void {
  g.pods.reset();
  g.restarts.reset();
  const byPhase = new Map<string, number>();
  for (const pod of pods) {
    const phase = pod.status?.phase ?? "Pending";
    byPhase.set(phase, (byPhase.get(phase) ?? 0) + 1);
    const labels = { namespace: pod.metadata.namespace ?? "default", pod: pod.metadata.name };
    g.restarts.set(labels, podDisplayStatus(pod).restarts);
  }
  for (const [phase, n] of byPhase) g.pods.set({ phase }, n);
}

function collectRelists(m: ReturnType<typeof plegMetrics>, relist: RelistStats): void {
  if (relist.lastMs !== undefined) m.last.set({}, relist.lastMs / 1000);
  m.count.inc({}, relist.count - m.count.get());
  m.sum.inc({}, Math.max(0, relist.totalMs / 1000 - m.sum.get()));
  m.containerEvents.inc({}, relist.events - m.containerEvents.get());
  m.eventRelists.inc({}, relist.eventRelists - m.eventRelists.get());
}

function collectProcess(m: { rss: Gauge; cpu: Counter; heap: Gauge }): void {
  const memory = process.memoryUsage();
  m.rss.set({}, memory.rss);
  m.heap.set({}, memory.heapUsed);
  const used = process.cpuUsage();
  m.cpu.inc({}, Math.max(0, (used.user + used.system) / 1e6 - m.cpu.get()));
}

/** Registers the agent's metrics in `metrics`, then `more` (other managers' metrics), and reads
 * the agent's figures from `sources` each time the metrics are collected. */
export function registerAgentMetrics(
  metrics: MetricsRegistry,
  sources: AgentMetricsSources,
  more: readonly ((metrics: MetricsRegistry) => void)[],
): void {
  const pods = podGauges(metrics);
  const pleg = plegMetrics(metrics);
  const proc = processMetrics(metrics);
  for (const register of more) register(metrics);
  metrics.onCollect(() => {
    collectPods(pods, sources.pods());
    pods.runtimeUp.set({}, sources.runtimeHealthy() ? 1 : 0);
    pods.eventsDropped.set({}, sources.eventsDropped());
    collectRelists(pleg, sources.relistStats());
    collectProcess(proc);
  });
}
