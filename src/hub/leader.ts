// Leadership of the hub's singletons (docs/hub-replicas.md, "Singletons"): the loops that write
// shared state on their own (the deployer's passes, the agent rollouts' passes) run on the one
// replica that leads. A single hub on SQLite always leads (alwaysLeader); replicas on PostgreSQL
// elect one under an advisory lock (pg/leader.ts).

/** Whether this hub runs the singletons now, and when that changes. */
export interface Leadership {
  /** True while this hub leads: its singletons run. */
  leading(): boolean;
  /** Which lead of this hub this is (it counts each time it takes the lead), or undefined while
   * it does not lead. A singleton runs only in the term it loaded the store in. */
  term(): number | undefined;
  /** Calls `fn` after each change (true: it took the lead; false: it stepped down). */
  onChange(fn: (leading: boolean) => void): void;
  /** Tries for the lead and keeps it until `signal`, then lets it go. */
  run(signal: AbortSignal): Promise<void>;
}

/** Refused: the write was made by a hub that no longer leads (its lock's session was lost). */
export class NotLeaderError extends Error {
  constructor(what: string) {
    super(`Cannot ${what}: this hub no longer leads (its leader lock's session was lost)`);
    this.name = "NotLeaderError";
  }
}

/** The leadership of a single hub: it always leads. */
export function alwaysLeader(): Leadership {
  return { leading: () => true, term: () => 0, onChange: () => {}, run: async () => {} };
}
