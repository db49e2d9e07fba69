// The agent rollouts' store (docs/hub-releases.md, "Storage"): one row a rollout, its spec and
// record, written before the API answers and after each pass that changed it, read when the hub
// starts. The interface is asynchronous, as a database across the network is; SQLite's
// implementation (store-sqlite.ts) does its work before its promise is returned.
import type { AgentRollout } from "./spec.ts";

export interface AgentRolloutStore {
  /** Every stored rollout, by name. */
  load(): Promise<AgentRollout[]>;
  /** Creates or replaces rollout `r.name`. `byPass`: written by the rollouts' pass, which only
   * the leading replica runs: refused (NotLeaderError) when this replica no longer leads. */
  save(r: AgentRollout, byPass?: boolean): Promise<void>;
  delete(name: string): Promise<void>;
}
