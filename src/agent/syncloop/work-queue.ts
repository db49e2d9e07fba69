// The work queue (the kubelet's queue.WorkQueue): when each pod is due to sync again. The pod
// workers enqueue a pod after each sync (the resync interval, or a back-off); the sync loop's
// tick takes the pods whose time has come. Created before both, so neither reaches the other.
import type { Clock } from "../../util/clock.ts";

export interface WorkQueue {
  /** Marks the pod to sync again `delayMs` from now (replacing an earlier mark). */
  enqueue(uid: string, delayMs: number): void;
  /** UIDs whose time has come (no longer queued). */
  takeDue(): string[];
  /** Forgets the pod (its source removed it). */
  remove(uid: string): void;
}

export function createWorkQueue(clock: Clock): WorkQueue {
  /** When each pod should sync again (monotonic ms: a wall step neither hurries nor holds it). */
  const due = new Map<string, number>();
  return {
    enqueue: (uid, delayMs) => void due.set(uid, clock.monotonic() + delayMs),
    takeDue() {
      const now = clock.monotonic();
      const out: string[] = [];
      for (const [uid, at] of due) {
        if (at > now) continue;
        due.delete(uid);
        out.push(uid);
      }
      return out;
    },
    remove: (uid) => void due.delete(uid),
  };
}
