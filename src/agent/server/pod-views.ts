// The API's view of each pod: the pod with its status from the status manager.
import type { Pod, PodStatus } from "../../api/types.ts";
import { deepFreeze } from "../../util/freeze.ts";

const PENDING: PodStatus = deepFreeze({ phase: "Pending" });

/**
 * The API's view of each pod: while neither the pod (frozen by the pod config) nor its status
 * (frozen by the status manager) changes, the same frozen object, so that its JSON is made once
 * (see frozen-json.ts) however often a client polls.
 */
export class PodViews {
  /** The last view of each pod object, with the status it was made with. */
  private readonly views = new WeakMap<Pod, { status: PodStatus | undefined; view: Pod }>();

  constructor(
    private readonly statusManager: { getPodStatus(uid: string): PodStatus | undefined },
  ) {}

  view(pod: Pod): Pod {
    const status = this.statusManager.getPodStatus(pod.metadata.uid as string);
    const last = this.views.get(pod);
    if (last !== undefined && last.status === status) return last.view;
    const view = Object.freeze({
      ...pod,
      apiVersion: "v1",
      kind: "Pod",
      status: status ?? PENDING,
    });
    this.views.set(pod, { status, view });
    return view;
  }
}
