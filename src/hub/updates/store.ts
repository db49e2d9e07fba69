// The wanted release of each node (docs/hub-releases.md, "Updating one node"): one row a node,
// written before the API answers (and by agent rollouts' passes, a pass's wishes in one write),
// read at start. Hub replicas share each write, and what the replica holding a node's agent hears
// of its update, through the change log (shared.ts). The interface is asynchronous, as a database across the network is; SQLite's
// implementation (store-sqlite.ts) does its work before its promise is returned.

/** The release the operator wants node `node` to run, and when it was set (ms). */
export interface WantedRelease {
  node: string;
  version: string;
  setAt: number;
}

/** A node's new wish: a release, or none (`version` null). */
export type WantedChange = WantedRelease | { node: string; version: null };

import type { UpdateStatus } from "../../protocol/index.ts";

/** One thing the holder of a node's agent heard: its update.status, the first offer of a
 * version, or its hello (only for a node in an update). */
export type SharedReport =
  | { status: UpdateStatus; at: number }
  | { offered: string; at: number }
  | { agent: { version: string; updates: boolean } };

/** Everything shared of one node's update, as a replica that starts loads it. */
export interface StoredReports {
  node: string;
  status?: { status: UpdateStatus; at: number };
  offered?: { version: string; at: number };
  agent?: { version: string; updates: boolean };
}

export interface UpdateStore {
  /** Every stored wish. */
  load(): Promise<WantedRelease[]>;
  /** Stores each node's new wish (a later change of one node wins), in one write; gives the
   * change log's number of the write (hub replicas; undefined: none). */
  write(changes: readonly WantedChange[]): Promise<number | undefined>;
  /** Hub replicas: tells the other replicas what this one heard of node `node`'s update, and
   * gives the change log's number of it (absent for a single hub, which hears it all itself). */
  share?(node: string, report: SharedReport): Promise<number | undefined>;
  /** Hub replicas: what was shared of each node's update (kept, so that a replica that starts
   * later has it). */
  loadReports?(): Promise<StoredReports[]>;
}
