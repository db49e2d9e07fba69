// The prober as the agent wires it: real handlers (CRI exec, network), Unhealthy events through
// the agent's recorder, workers driven by every status the status manager publishes, and a pod
// sync requested on every settled result change.

import type { Pod } from "../../api/types.ts";
import type { CriRuntime } from "../../cri/index.ts";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import { type EventRecorder, podRef } from "../events/index.ts";
import type { StatusManager } from "../status/index.ts";
import { createProbeHandler } from "./handlers.ts";
import { createProberManager, type ProberManager } from "./manager.ts";

export interface AgentProberDeps {
  clock: Clock;
  logger: Logger;
  cri: Pick<CriRuntime, "execSync">;
  recorder: EventRecorder;
  statusManager: StatusManager;
  /** The pod with this UID, if a source still has it. */
  pod(uid: string): Pod | undefined;
  isTerminating(uid: string): boolean;
  /** Asks the pod's worker for a sync (a liveness failure restarts the container there). */
  sync(pod: Pod): void;
}

export function createAgentProber(deps: AgentProberDeps): ProberManager {
  const prober = createProberManager({
    clock: deps.clock,
    logger: deps.logger,
    handler: createProbeHandler({ cri: deps.cri, clock: deps.clock }),
    event: (pod, name, type, reason, message) => {
      const init = !pod.spec.containers.some((c) => c.name === name);
      deps.recorder.event(podRef(pod, { name, init }), type, reason, message);
    },
    isTerminating: deps.isTerminating,
    onResult: (change) => {
      const pod = deps.pod(change.podUid);
      if (pod !== undefined) deps.sync(pod);
    },
  });
  deps.statusManager.subscribe(({ uid, status }) => {
    const pod = deps.pod(uid);
    if (status === undefined || pod === undefined) prober.removePod(uid);
    else prober.updatePod(pod, status);
  });
  return prober;
}
