// The agent's PLEG: the runtime's pod listing it relists (which housekeeping and the CPU manager
// also read, a moment old; kuberuntime's createRuntimeListing), the relist periods from the agent
// config, the pod cache it shares with pod sync, and the runtime's container events that make it
// relist at once.
import type { ContainerEvents } from "../../cri/index.ts";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import type { PodStatus, RunningPod } from "../kubecontainer/types.ts";
import type { PodCache } from "./cache.ts";
import { createPLEG, type PLEG } from "./generic.ts";
import type { ListingCache } from "./listing.ts";
import { createRuntimeEventWatch, type RuntimeEventWatch } from "./runtime-events.ts";

interface PlegSettings {
  nodeName: string;
  plegRelistPeriod: number;
  plegEventedRelistPeriod: number;
}

export interface AgentPlegInput {
  config: PlegSettings;
  cri: ContainerEvents;
  clock: Clock;
  logger: Logger;
  listing: ListingCache<RunningPod>;
  podCache: PodCache;
  getPodStatus(uid: string, name: string, namespace: string): Promise<PodStatus>;
  /** Pod sync's view of the pods it acts on (see PLEGDeps). */
  podSync: {
    readPending(uid: string): boolean;
    settled(uid: string, status: PodStatus): boolean;
  };
}

export function setupPLEG(input: AgentPlegInput): {
  pleg: PLEG;
  runtimeEvents: RuntimeEventWatch | undefined;
} {
  const { config: settings, clock, podSync } = input;
  const log = input.logger.with({ component: "pleg" });
  const pleg = createPLEG({
    clock,
    logger: log,
    relistPeriodMs: settings.plegRelistPeriod,
    eventedRelistPeriodMs: settings.plegEventedRelistPeriod || settings.plegRelistPeriod,
    listPods: () => input.listing.fresh(),
    getPodStatus: input.getPodStatus,
    // A pod a sync is acting on gets its status read by that sync; the relist after it takes it.
    readPending: (uid) => podSync.readPending(uid),
    settledBySync: (uid, status) => podSync.settled(uid, status),
    cache: input.podCache,
  });
  // Container exits seen at once: the runtime's events make the PLEG relist (0: relist only).
  const runtimeEvents =
    settings.plegEventedRelistPeriod > 0
      ? createRuntimeEventWatch({
          clock,
          logger: log,
          subscribe: (handler, s) => input.cri.containerEvents(handler, s),
          onEvent: (event) => pleg.notify(event),
          onFlowing: (flowing) => pleg.setEventsFlowing(flowing),
        })
      : undefined;
  return { pleg, runtimeEvents };
}
