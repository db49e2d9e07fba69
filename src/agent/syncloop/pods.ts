// The sync loop's record of pods: the ones its sources want (known), those admission rejected,
// those removed by their source whose workers are still stopping them, and when each pod is due
// to sync again.
import type { Pod } from "../../api/types.ts";
import { deepFreeze } from "../../util/freeze.ts";

export const uidOf = (pod: Pod): string => pod.metadata.uid as string;

export class PodRecord {
  /** Pods a source wants, admitted or rejected, by UID. */
  readonly known = new Map<string, Pod>();
  /** Known pods admission rejected (they never run; their status is Failed). */
  readonly rejected = new Set<string>();
  /** Pods removed by their source whose workers are still terminating them. */
  readonly removing = new Map<string, Pod>();
  /** When each pod should sync again (epoch ms). */
  readonly due = new Map<string, number>();

  /** Known pods that were admitted (whatever their workers' state). */
  admitted(): Pod[] {
    return [...this.known.values()].filter((p) => !this.rejected.has(uidOf(p)));
  }

  /** Forgets a pod its source removed; returns whether it had been rejected. */
  remove(uid: string): boolean {
    this.known.delete(uid);
    this.due.delete(uid);
    return this.rejected.delete(uid);
  }

  /** The pod shown as Terminating until its worker is done, as a deleted pod in the kubelet.
   * Frozen like every pod from the pod config (the local API relies on it). */
  markRemoving(pod: Pod, now: number): Pod {
    const deleting: Pod = deepFreeze({
      ...pod,
      metadata: {
        ...pod.metadata,
        deletionTimestamp: new Date(now).toISOString().replace(/\.\d{3}Z$/, "Z"),
        deletionGracePeriodSeconds: pod.spec.terminationGracePeriodSeconds ?? 30,
      },
    });
    this.removing.set(uidOf(pod), deleting);
    return deleting;
  }

  /** Known pods, and removed ones until `stillStopping` says they are done. */
  visible(stillStopping: (uid: string) => boolean): Pod[] {
    for (const uid of this.removing.keys()) {
      if (!stillStopping(uid) || this.known.has(uid)) this.removing.delete(uid);
    }
    return [...this.known.values(), ...this.removing.values()];
  }

  /** UIDs due to sync at `now` (and no longer due). */
  takeDue(now: number): string[] {
    const out: string[] = [];
    for (const [uid, at] of this.due) {
      if (at > now) continue;
      this.due.delete(uid);
      out.push(uid);
    }
    return out;
  }
}
