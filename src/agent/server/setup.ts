// The local API's view of the agent: pods from the pod manager with statuses from the status
// manager, logs by kubelet's layout, exec through CRI, health and metrics.
import type { Node } from "../../api/node.ts";
import type { Event, Pod } from "../../api/types.ts";
import type { CriRuntime } from "../../cri/index.ts";
import type { OpenStream } from "../../streams/types.ts";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import { containerLogPath } from "../logs/index.ts";
import type { PodManager } from "../podmanager/index.ts";
import { type AgentMetricsSources, registerAgentMetrics } from "./agent-metrics.ts";
import { type AgentServer, startAgentServer } from "./index.ts";
import { createMetricsRegistry, type MetricsRegistry } from "./metrics.ts";
import { PodViews } from "./pod-views.ts";
import type { ExecResult, ServerDeps } from "./types.ts";

export interface ServerDepsInput {
  podLogsDir: string;
  pods: Pick<PodManager, "visiblePods" | "podByFullName">;
  /** Whether the worker of a pod its source removed may still be stopping it. */
  stillStopping(uid: string): boolean;
  statusManager: {
    getPodStatus(uid: string): Pod["status"] | undefined;
    subscribe(fn: () => void): () => void;
  };
  recorder: { list(): Event[]; readonly dropped: number };
  cri: Pick<CriRuntime, "execSync">;
  /** The container runtime's health (the kubelet's runtimeState). */
  health: { healthy(): boolean; reasons(): string[] };
  /** PLEG's relist durations. */
  relistStats: AgentMetricsSources["relistStats"];
  /** Other managers' metrics (probes, evictions), registered after the agent's own. */
  metrics?: readonly ((metrics: MetricsRegistry) => void)[];
  /** The node as last built by the node status manager. */
  node?: () => Node;
}

/** Runs `cmd` in the pod's running container `container` (CRI ExecSync). */
async function execIn(
  cri: Pick<CriRuntime, "execSync">,
  pod: Pod,
  container: string,
  cmd: string[],
  timeoutSec: number,
): Promise<ExecResult> {
  const statuses = [
    ...(pod.status?.containerStatuses ?? []),
    ...(pod.status?.initContainerStatuses ?? []),
  ];
  const status = statuses.find((s) => s.name === container);
  if (status?.containerID === undefined || status.state?.running === undefined) {
    throw new Error(`container ${container} of pod ${pod.metadata.name} is not running`);
  }
  const containerId = status.containerID.replace(/^[a-z]+:\/\//, "");
  const res = await cri.execSync({ containerId, cmd, timeout: timeoutSec });
  const text = new TextDecoder();
  return {
    stdout: text.decode(res.stdout),
    stderr: text.decode(res.stderr),
    exitCode: res.exitCode,
  };
}

function createServerDeps(input: ServerDepsInput): ServerDeps {
  const { pods, statusManager, recorder, health } = input;
  const views = new PodViews(statusManager);
  const listPods = () => pods.visiblePods(input.stillStopping).map((p) => views.view(p));
  const metrics = createMetricsRegistry();
  registerAgentMetrics(
    metrics,
    {
      pods: listPods,
      runtimeHealthy: () => health.healthy(),
      eventsDropped: () => recorder.dropped,
      relistStats: input.relistStats,
    },
    input.metrics ?? [],
  );
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
      containerLogPath(input.podLogsDir, pod, container, previous),
    exec: (pod, container, cmd, timeoutSec) => execIn(input.cri, pod, container, cmd, timeoutSec),
    events: () => recorder.list(),
    healthy: () => {
      const reasons = health.reasons();
      return { ok: reasons.length === 0, reasons };
    },
    metrics: () => metrics.render(),
    ...(input.node !== undefined && { node: input.node }),
  };
}

export interface LocalApiOptions {
  socketPath: string;
  log: Logger;
  clock: Clock;
  /** The stream opener (logs, exec, port-forward) over the API's pods and log paths; the hub
   * client opens its streams through it too. */
  streams(deps: Pick<ServerDeps, "getPod" | "logPath">): OpenStream;
}

/** Starts the local API on its socket; returns it and its stream opener. */
export async function startLocalApi(
  input: ServerDepsInput,
  opts: LocalApiOptions,
): Promise<{ server: AgentServer; streams: OpenStream }> {
  const deps = createServerDeps(input);
  const streams = opts.streams(deps);
  const server = await startAgentServer(deps, {
    socketPath: opts.socketPath,
    log: opts.log,
    clock: opts.clock,
    streams,
  });
  return { server, streams };
}
