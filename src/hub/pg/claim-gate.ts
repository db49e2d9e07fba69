// Orders a hub replica's claims of nodes and its writes of queued reports (node-sessions.ts): a
// write takes its batch, with the epochs it was queued under, only once no claim of this replica
// is in flight, and no claim starts while a write runs. Otherwise a write whose batch was taken
// before this replica took a node again (its agent reconnected to it) would find the new epoch
// and be dropped as a stale holder's, and its messages acknowledged. Claims run at once with one
// another; a write waiting keeps new claims waiting, so a stream of claims cannot hold it back.

export class ClaimGate {
  private readonly claims = new Set<Promise<unknown>>();
  /** The writes running or waiting for claims to end. */
  private writes = 0;
  private writesDone: Promise<void> = Promise.resolve();
  private endWrites: () => void = () => {};

  /** Runs `fn` (a claim) once no write runs or waits. */
  async claim<T>(fn: () => Promise<T>): Promise<T> {
    while (this.writes > 0) await this.writesDone;
    const run = fn();
    this.claims.add(run);
    try {
      return await run;
    } finally {
      this.claims.delete(run);
    }
  }

  /** Runs `fn` (a write, which takes its batch when it starts) once no claim is in flight. */
  async write<T>(fn: () => Promise<T>): Promise<T> {
    if (this.writes++ === 0)
      this.writesDone = new Promise((resolve) => {
        this.endWrites = resolve;
      });
    try {
      while (this.claims.size > 0) await Promise.allSettled([...this.claims]);
      return await fn();
    } finally {
      if (--this.writes === 0) this.endWrites();
    }
  }
}
