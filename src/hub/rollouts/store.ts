// The agent rollouts' store (docs/hub-releases.md, "Storage"): one row a rollout, its spec and
// record, written before the API answers and after each pass that changed it, read when the hub
// starts. A write changes the stored row as a function of what is stored, under the row's lock:
// hub replicas write the same rollout (an operator's pause at one, the leader's pass at another)
// and neither undoes the other's change. On PostgreSQL each write is also a row of the change
// log (kind "agentrollouts"), which every replica follows. The interface is asynchronous, as a
// database across the network is; SQLite's implementation (store-sqlite.ts) does its work before
// its promise is returned.
import type { AgentRollout } from "./spec.ts";

export const ROLLOUT_KIND = "agentrollouts";

/** What a change makes of the stored rollout (undefined: none stored): the rollout to store,
 * null to delete it, undefined to leave it as it is. It may throw: nothing is written. */
export type RolloutChange = (stored: AgentRollout | undefined) => AgentRollout | null | undefined;

export interface AgentRolloutStore {
  /** Every stored rollout, by name. */
  load(): Promise<AgentRollout[]>;
  /** Changes rollout `name` as `change` says from what is stored of it, in one transaction
   * holding its row; gives what is stored after it and the change log's number of the write
   * (hub replicas; undefined: none). `byPass`: written by the rollouts' pass, which only the
   * leading replica runs: refused (NotLeaderError) when this replica no longer leads. */
  change(
    name: string,
    change: RolloutChange,
    byPass?: boolean,
  ): Promise<{ stored: AgentRollout | undefined; rv?: number }>;
}

/** The change log's text of a stored rollout. */
export function rolloutText(r: AgentRollout): string {
  return JSON.stringify({ spec: r.spec, record: r.record, created: r.created });
}

/** The rollout `name` a change log row's text gives. */
export function rolloutOf(name: string, text: string): AgentRollout {
  const o = JSON.parse(text) as Omit<AgentRollout, "name">;
  if (typeof o.created !== "number" || typeof o.spec !== "object" || typeof o.record !== "object")
    throw new Error(`not an agent rollout: ${text.slice(0, 200)}`);
  return { name, spec: o.spec, record: o.record, created: o.created };
}
