// One probe run, as kubelet's prober: run the handler with its timeout, turn anything it throws
// (or a handler that never answers) into a failure with a message, and record the events
// ("Liveness probe failed: <output>" as Unhealthy, warnings as ProbeWarning).
//
// Invariant: runProbe() always settles, at the latest `hardLimitMs` after the handler's timeout,
// whatever the handler does.

import type { Probe } from "../../api/types.ts";
import type { Clock } from "../../util/clock.ts";
import {
  type ContainerEventFn,
  kindTitle,
  type ProbeHandlerFn,
  type ProbeKind,
  type ProbeOutcome,
  type ProbeTarget,
} from "./types.ts";

/** Longest output kept in an event message. */
export const EVENT_OUTPUT_MAX = 1024;
/** How long past its timeout a handler may take before its run is given up. */
const DEFAULT_HARD_LIMIT_MS = 5_000;

export interface ProberDeps {
  clock: Clock;
  handler: ProbeHandlerFn;
  event: ContainerEventFn;
  hardLimitMs?: number;
}

export function errorText(err: unknown): string {
  if (err instanceof Error) return err.message;
  return typeof err === "string" ? err : JSON.stringify(err);
}

/** `output` cut to EVENT_OUTPUT_MAX characters, saying how much was cut. */
function cutOutput(output: string): string {
  if (output.length <= EVENT_OUTPUT_MAX) return output;
  return `${output.slice(0, EVENT_OUTPUT_MAX)}... (${output.length - EVENT_OUTPUT_MAX} more characters)`;
}

/** The timeout of a probe in ms (timeoutSeconds, default 1). */
const probeTimeoutMs = (p: Probe): number => (p.timeoutSeconds || 1) * 1000;

/** Runs one probe and records its Unhealthy or ProbeWarning event, unless `moot()` says, once
 * the probe is done, that its result no longer matters (a liveness probe of a pod that began
 * terminating while the probe ran). */
export async function runProbe(
  deps: ProberDeps,
  kind: ProbeKind,
  probe: Probe,
  target: ProbeTarget,
  moot?: () => boolean,
): Promise<ProbeOutcome> {
  const timeoutMs = probeTimeoutMs(probe);
  const limitMs = timeoutMs + (deps.hardLimitMs ?? DEFAULT_HARD_LIMIT_MS);
  const ctl = new AbortController();
  let cancelTimer = () => {};
  const guard = new Promise<ProbeOutcome>((resolve) => {
    cancelTimer = deps.clock.setTimer(limitMs, () => {
      ctl.abort(new Error(`probe did not finish within ${limitMs} ms`));
      resolve({ result: "failure", output: `probe did not finish within ${limitMs / 1000}s` });
    });
  });
  let outcome: ProbeOutcome;
  try {
    const run = Promise.resolve().then(() => deps.handler(probe, target, timeoutMs, ctl.signal));
    outcome = await Promise.race([run, guard]);
  } catch (err) {
    outcome = { result: "failure", output: errorText(err) || "probe failed" };
  } finally {
    cancelTimer();
    ctl.abort();
  }
  if (!moot?.()) recordEvent(deps, kind, target, outcome);
  return outcome;
}

function recordEvent(deps: ProberDeps, kind: ProbeKind, t: ProbeTarget, o: ProbeOutcome): void {
  try {
    if (o.result === "failure") {
      const message = `${kindTitle(kind)} probe failed: ${cutOutput(o.output)}`;
      deps.event(t.pod, t.container.name, "Warning", "Unhealthy", message);
    } else if (o.warning) {
      const message = `${kindTitle(kind)} probe warning: ${cutOutput(o.output)}`;
      deps.event(t.pod, t.container.name, "Warning", "ProbeWarning", message);
    }
  } catch {
    // An event that cannot be recorded must not fail the probe.
  }
}
