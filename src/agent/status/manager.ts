// The status manager: the agent's single store of the latest v1 status of each pod, read by the
// local API and the hub client. It keeps what the API server would keep: a condition's
// lastTransitionTime while its status is unchanged, and startTime once set; and it notifies
// subscribers only when a status actually changes. Stored statuses are deeply frozen and handed
// out as they are (the local API reads every pod's status on each request), so readers never
// change them.

import type { PodStatus } from "../../api/types.ts";
import type { Clock } from "../../util/clock.ts";
import { deepFreeze } from "../../util/freeze.ts";
import { type Logger, nullLogger } from "../../util/log.ts";
import { keepTransitionTimes } from "./conditions.ts";
import { toRFC3339 } from "./reasons.ts";

/** A change of one pod's status (frozen); `status` is undefined when the pod was removed. */
export interface StatusChange {
  uid: string;
  status: PodStatus | undefined;
}

type StatusListener = (change: StatusChange) => void;

export interface StatusManager {
  /** Stores `status` for the pod, keeping transition times and startTime from the stored one.
   * Returns true when the stored status changed (and subscribers were told). */
  setPodStatus(uid: string, status: PodStatus): boolean;
  /** The stored status (frozen, shared: read-only), or undefined for an unknown pod. */
  getPodStatus(uid: string): PodStatus | undefined;
  /** UIDs of all pods with a stored status. */
  uids(): string[];
  /** Forgets the pod and tells subscribers (status undefined); no-op for an unknown pod. */
  removePod(uid: string): void;
  /** Calls `listener` after every change until the returned function is called. A listener
   * that throws is logged and does not stop the others. */
  subscribe(listener: StatusListener): () => void;
}

export interface StatusManagerDeps {
  clock: Clock;
  logger?: Logger;
}

export function createStatusManager(deps: StatusManagerDeps): StatusManager {
  const logger = deps.logger ?? nullLogger;
  const statuses = new Map<string, PodStatus>();
  const listeners = new Set<StatusListener>();

  const notify = (change: StatusChange) => {
    for (const listener of [...listeners]) {
      try {
        listener(change);
      } catch (error) {
        logger.error("A pod status listener failed", { uid: change.uid, error });
      }
    }
  };

  return {
    setPodStatus(uid, status) {
      const previous = statuses.get(uid);
      const next = normalize(status, previous, deps.clock.now());
      if (previous && Bun.deepEquals(previous, next)) return false;
      statuses.set(uid, deepFreeze(next));
      notify({ uid, status: next });
      return true;
    },
    getPodStatus: (uid) => statuses.get(uid),
    uids: () => [...statuses.keys()],
    removePod(uid) {
      if (!statuses.delete(uid)) return;
      notify({ uid, status: undefined });
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}

function normalize(status: PodStatus, previous: PodStatus | undefined, now: number): PodStatus {
  const next = structuredClone(status);
  if (next.conditions) {
    next.conditions = keepTransitionTimes(next.conditions, previous?.conditions, now);
  }
  next.startTime = previous?.startTime ?? next.startTime ?? toRFC3339(now);
  return next;
}
