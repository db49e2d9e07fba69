// Claims of nodes (node-sessions.ts) gathered into batches: the names asked while no batch runs
// (within one turn of the event loop) or while one runs are taken by the next batch, in one call
// of `run` (one transaction). A name asked again while it waits goes to the batch after (a
// statement may not change one row twice, and each ask gets an epoch of its own). One batch runs
// at a time, so when many agents arrive at once (a replica's agents moving to the others), the
// claims of those arriving while one transaction runs share the next.

interface Ask<T> {
  name: string;
  replica: string;
  resolve(v: T): void;
  reject(err: unknown): void;
}

/** Takes the distinct `names` for `replica`; gives each one's answer. */
export type ClaimRun<T> = (replica: string, names: string[]) => Promise<Map<string, T>>;

export class ClaimBatcher<T> {
  private waiting: Ask<T>[] = [];
  private running = false;

  /** `max`: the most names one batch takes. */
  constructor(
    private readonly run: ClaimRun<T>,
    private readonly max = 1000,
  ) {}

  /** Claims `name` for `replica` with the next batch; rejects when that batch fails. */
  ask(name: string, replica: string): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.waiting.push({ name, replica, resolve, reject });
      if (!this.running) {
        this.running = true;
        setImmediate(() => void this.drain());
      }
    });
  }

  /** Runs batches until nothing waits. */
  private async drain(): Promise<void> {
    while (this.waiting.length > 0) await this.runOne(this.takeBatch());
    this.running = false;
  }

  /** The next batch: the first asks of distinct names of one replica, up to `max`. */
  private takeBatch(): Ask<T>[] {
    const replica = this.waiting[0]?.replica;
    const names = new Set<string>();
    const batch: Ask<T>[] = [];
    const rest: Ask<T>[] = [];
    for (const a of this.waiting) {
      if (a.replica !== replica || names.has(a.name) || batch.length >= this.max) rest.push(a);
      else {
        names.add(a.name);
        batch.push(a);
      }
    }
    this.waiting = rest;
    return batch;
  }

  private async runOne(batch: Ask<T>[]): Promise<void> {
    const replica = batch[0]?.replica;
    if (replica === undefined) return;
    try {
      const got = await this.run(
        replica,
        batch.map((a) => a.name),
      );
      for (const a of batch) {
        const v = got.get(a.name);
        if (v === undefined) a.reject(new Error(`node ${a.name} was not claimed`));
        else a.resolve(v);
      }
    } catch (err) {
      for (const a of batch) a.reject(err);
    }
  }
}
