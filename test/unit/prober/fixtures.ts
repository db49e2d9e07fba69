// A prober manager on a FakeClock with a scripted handler, and statuses for it.

import {
  createProberManager,
  type ProbeHandlerFn,
  type ProbeKind,
  type ProbeOutcome,
  type ResultChange,
} from "../../../src/agent/prober/index.ts";
import type { PodStatus as ApiPodStatus, Container, Pod, Probe } from "../../../src/api/types.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { createLogger } from "../../../src/util/log.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";

export interface Harness {
  clock: FakeClock;
  manager: ReturnType<typeof createProberManager>;
  /** Outcomes the handler returns next, per kind (default: success). */
  script: Map<ProbeKind, (ProbeOutcome | Error | "hang" | (() => ProbeOutcome))[]>;
  calls: { kind: string; containerId: string }[];
  events: string[];
  changes: ResultChange[];
  terminating: Set<string>;
  /** Log lines of the manager. */
  logs: string[];
  /** When set, onResult throws it (a fault of the code the results go to). */
  onResultError?: Error;
}

const kindOf = (p: Probe, c: Container): ProbeKind =>
  p === c.livenessProbe ? "liveness" : p === c.startupProbe ? "startup" : "readiness";

export function harness(opts: { startAt?: number } = {}): Harness {
  const clock = new FakeClock(opts.startAt);
  const h = {
    clock,
    script: new Map(),
    calls: [],
    events: [],
    changes: [],
    terminating: new Set<string>(),
    logs: [],
  } as unknown as Harness;
  const handler: ProbeHandlerFn = async (probe, target) => {
    const kind = kindOf(probe, target.container);
    h.calls.push({ kind, containerId: target.containerId });
    const next = h.script.get(kind)?.shift() ?? { result: "success", output: "" };
    if (next === "hang") return new Promise<ProbeOutcome>(() => {});
    if (next instanceof Error) throw next;
    return typeof next === "function" ? next() : next;
  };
  h.manager = createProberManager({
    clock,
    handler,
    event: (pod, name, type, reason, message) =>
      h.events.push(`${type} ${reason} ${pod.metadata.name}/${name}: ${message}`),
    isTerminating: (uid) => h.terminating.has(uid),
    onResult: (c) => {
      if (h.onResultError) throw h.onResultError;
      h.changes.push(c);
    },
    logger: createLogger({ write: (line) => h.logs.push(line) }),
    random: () => 0.5,
    hardLimitMs: 1000,
  });
  return h;
}

export const probe = (extra: Partial<Probe> = {}): Probe => ({
  exec: { command: ["true"] },
  periodSeconds: 1,
  timeoutSeconds: 1,
  successThreshold: 1,
  failureThreshold: 3,
  ...extra,
});

export function podWith(containers: Partial<Container>[], hostNetwork = false): Pod {
  return makePod({
    containers: containers.map((c) => makeContainer(c)),
    spec: { hostNetwork },
  });
}

/** A status with every named container running under `ids[name]`, started at `startedAt`. */
export function runningStatus(
  pod: Pod,
  ids: Record<string, string>,
  startedAt: number,
  podIP = "10.99.0.7",
): ApiPodStatus {
  return {
    phase: "Running",
    podIP,
    containerStatuses: pod.spec.containers.map((c) => ({
      name: c.name,
      image: c.image,
      imageID: "",
      ready: false,
      restartCount: 0,
      ...(ids[c.name] ? { containerID: `containerd://${ids[c.name]}` } : {}),
      state: ids[c.name]
        ? { running: { startedAt: new Date(startedAt).toISOString() } }
        : { waiting: { reason: "ContainerCreating" } },
      lastState: {},
    })),
  };
}

/** Lets every pending promise callback run (one macrotask turn; no time passes on the clock). */
export const flush = () => new Promise<void>((resolve) => setImmediate(resolve));
