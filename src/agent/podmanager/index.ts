// The pod manager (the kubelet's pod.Manager): the pods the sources want now, by UID and by full
// name (namespace/name), and the pods their source removed while their workers still stop them.
// The sync loop is its only writer; GC, the prober, pod sync, eviction, the local API and the hub
// client read it. fleetlet has no API server, so it keeps no mirror pods; a static pod (the
// manifest folder's) is told from a hub pod by its config.source annotation.
//
// Invariants:
// - every pod held is frozen (the pod config's own copies, or markRemoving()'s);
// - byFullName maps a full name to the UID last set under it, and only while that UID is held;
// - a removed pod whose UID is wanted again is shown once: visiblePods() forgets the removed one.
import type { Pod } from "../../api/types.ts";
import { deepFreeze } from "../../util/freeze.ts";

export const uidOf = (pod: Pod): string => pod.metadata.uid as string;

/** namespace/name, as the pod workers and the pod config name a pod. */
const fullNameOf = (pod: Pod): string =>
  `${pod.metadata.namespace ?? "default"}/${pod.metadata.name}`;

export interface PodManager {
  /** The pods the sources want (admitted or rejected at admission), by UID. */
  pods(): ReadonlyMap<string, Pod>;
  /** The wanted pod with this UID. */
  pod(uid: string): Pod | undefined;
  /** Whether a source wants the pod with this UID. */
  has(uid: string): boolean;
  /** The wanted pod of this namespace and name. */
  podByFullName(namespace: string, name: string): Pod | undefined;
  /** The pods to show: the wanted ones, then the removed ones until `stillStopping` says their
   * worker is done (those are then forgotten). */
  visiblePods(stillStopping: (uid: string) => boolean): Pod[];
  /** The sync loop's: adds or replaces a wanted pod. */
  setPod(pod: Pod): void;
  /** The sync loop's: forgets a wanted pod (a removed one stays until markRemoving()'s ends). */
  removePod(uid: string): void;
  /** The sync loop's: keeps a pod its source removed, shown as Terminating (a deletionTimestamp
   * of `now`) as a deleted pod in the kubelet until its worker is done; returns that pod. */
  markRemoving(pod: Pod, now: number): Pod;
}

export function createPodManager(): PodManager {
  return new BasicPodManager();
}

class BasicPodManager implements PodManager {
  /** Pods a source wants, by UID. */
  private readonly byUid = new Map<string, Pod>();
  /** Full name → UID of the wanted pod set last under it. */
  private readonly byFullName = new Map<string, string>();
  /** Pods removed by their source whose workers may still be stopping them, by UID. */
  private readonly removing = new Map<string, Pod>();

  pods(): ReadonlyMap<string, Pod> {
    return this.byUid;
  }

  pod(uid: string): Pod | undefined {
    return this.byUid.get(uid);
  }

  has(uid: string): boolean {
    return this.byUid.has(uid);
  }

  podByFullName(namespace: string, name: string): Pod | undefined {
    const uid = this.byFullName.get(`${namespace}/${name}`);
    return uid === undefined ? undefined : this.byUid.get(uid);
  }

  visiblePods(stillStopping: (uid: string) => boolean): Pod[] {
    for (const uid of this.removing.keys()) {
      if (!stillStopping(uid) || this.byUid.has(uid)) this.removing.delete(uid);
    }
    return [...this.byUid.values(), ...this.removing.values()];
  }

  setPod(pod: Pod): void {
    const uid = uidOf(pod);
    const previous = this.byUid.get(uid);
    if (previous !== undefined && fullNameOf(previous) !== fullNameOf(pod))
      this.forgetName(previous);
    this.byUid.set(uid, pod);
    this.byFullName.set(fullNameOf(pod), uid);
  }

  removePod(uid: string): void {
    const pod = this.byUid.get(uid);
    if (pod === undefined) return;
    this.byUid.delete(uid);
    this.forgetName(pod);
  }

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

  private forgetName(pod: Pod): void {
    const name = fullNameOf(pod);
    if (this.byFullName.get(name) === uidOf(pod)) this.byFullName.delete(name);
  }
}
