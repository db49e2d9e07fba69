// Shared types of the prober: what a probe is about, what it returns, and the narrow functions
// the prober needs from the rest of the agent.

import type { Container, Pod, Probe } from "../../api/types.ts";

export type ProbeKind = "liveness" | "readiness" | "startup";

export const PROBE_KINDS: readonly ProbeKind[] = ["liveness", "readiness", "startup"];

/** kubelet's results.Result without Unknown: an absent result is "unknown". */
export type ProbeResult = "success" | "failure";

/** What one run of a handler found; `output` explains a failure (or a warning). */
export interface ProbeOutcome {
  result: ProbeResult;
  output: string;
  /** A success worth an event (a redirect to another host that was not followed). */
  warning?: boolean;
}

/** Everything a handler needs to probe one container. */
export interface ProbeTarget {
  pod: Pod;
  container: Container;
  /** CRI container ID, without the runtime scheme. */
  containerId: string;
  /** Where httpGet, tcpSocket and grpc go when the handler names no host. */
  host: string;
}

/** Runs the handler of `probe` (exactly one of exec, httpGet, tcpSocket, grpc) once. Must honour
 * `timeoutMs` and `signal`; may throw (the prober turns a throw into a failure). */
export type ProbeHandlerFn = (
  probe: Probe,
  target: ProbeTarget,
  timeoutMs: number,
  signal: AbortSignal,
) => Promise<ProbeOutcome>;

/** Records an event about one container of a pod. */
export type ContainerEventFn = (
  pod: Pod,
  containerName: string,
  type: "Normal" | "Warning",
  reason: string,
  message: string,
) => void;

export const probeSpec = (c: Container, kind: ProbeKind): Probe | undefined =>
  kind === "liveness" ? c.livenessProbe : kind === "readiness" ? c.readinessProbe : c.startupProbe;

/** "Liveness", "Readiness", "Startup": as probe events spell them. */
export const kindTitle = (kind: ProbeKind): string => kind[0]?.toUpperCase() + kind.slice(1);
