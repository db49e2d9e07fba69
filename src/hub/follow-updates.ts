// Hub replicas: the change log's rows of node updates and agent rollouts (updates/shared.ts,
// rollouts/store.ts), written by another replica, taken into this one's: a wish (offered to the
// node's agent if it is connected here), what the replica holding an agent heard of its update,
// an agent rollout as stored. A replica that fell behind the log's trim loads them again.
import type { ObjectRow } from "./follow-view.ts";
import type { AgentRollouts } from "./rollouts/controller.ts";
import { ROLLOUT_KIND, rolloutOf } from "./rollouts/store.ts";
import { REPORT_KIND, reportOf, WISH_KIND, wishOf } from "./updates/shared.ts";
import type { NodeUpdates } from "./updates/updates.ts";

export interface UpdateFollowing {
  /** Takes `row` if it is of these kinds; whether it was. */
  take(row: ObjectRow): boolean;
  /** Loads the wishes and rollouts again from the store. */
  reload(): Promise<void>;
}

export function followUpdates(
  updates: NodeUpdates,
  rollouts: () => AgentRollouts | undefined,
  sessions: { updateChanged(node: string): void },
): UpdateFollowing {
  return {
    take(row) {
      if (row.kind === WISH_KIND) {
        if (updates.takeWish(wishOf(row.key, row.object), row.rv)) sessions.updateChanged(row.key);
      } else if (row.kind === REPORT_KIND) {
        if (row.object !== null) updates.takeReport(row.key, reportOf(row.object), row.rv);
      } else if (row.kind === ROLLOUT_KIND) {
        const r = row.object === null ? null : rolloutOf(row.key, row.object);
        rollouts()?.takeStored(row.key, r, row.rv);
      } else return false;
      return true;
    },
    async reload() {
      for (const node of await updates.reloadWishes()) sessions.updateChanged(node);
      await rollouts()?.reload();
    },
  };
}
