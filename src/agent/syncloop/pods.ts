// The sync loop's record of pods: the pod manager it writes (the pods its sources want, and those
// removed whose workers are still stopping them), those admission rejected, and the work queue
// of pods due to sync again.
import type { Pod } from "../../api/types.ts";
import { type PodManager, uidOf } from "../podmanager/index.ts";
import type { WorkQueue } from "./work-queue.ts";

export { uidOf };

export class PodRecord {
  /** Wanted pods admission rejected (they never run; their status is Failed). */
  readonly rejected = new Set<string>();

  constructor(
    /** Pods a source wants, admitted or rejected; the loop is its only writer. */
    readonly pods: PodManager,
    /** When each pod should sync again. */
    readonly queue: WorkQueue,
  ) {}

  /** Wanted pods that were admitted (whatever their workers' state). */
  admitted(): Pod[] {
    return [...this.pods.pods().values()].filter((p) => !this.rejected.has(uidOf(p)));
  }

  /** Forgets a pod its source removed; returns whether it had been rejected. */
  remove(uid: string): boolean {
    this.pods.removePod(uid);
    this.queue.remove(uid);
    return this.rejected.delete(uid);
  }
}
