// The wanted release of each node (docs/hub-releases.md, "Updating one node"): one row a node,
// written before the API answers (and by agent rollouts' passes, a pass's wishes in one write),
// read at start. The interface is asynchronous, as a database across the network is; SQLite's
// implementation (store-sqlite.ts) does its work before its promise is returned.

/** The release the operator wants node `node` to run, and when it was set (ms). */
export interface WantedRelease {
  node: string;
  version: string;
  setAt: number;
}

/** A node's new wish: a release, or none (`version` null). */
export type WantedChange = WantedRelease | { node: string; version: null };

export interface UpdateStore {
  /** Every stored wish. */
  load(): Promise<WantedRelease[]>;
  /** Stores each node's new wish (a later change of one node wins), in one write. */
  write(changes: readonly WantedChange[]): Promise<void>;
}
