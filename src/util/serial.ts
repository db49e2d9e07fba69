// Runs asynchronous work one piece at a time, in the order asked: a piece starts once the one
// before it settled (fulfilled or rejected), so that work awaiting a store never overlaps.
export class Serial {
  /** The tail of the work asked for so far; never rejects. */
  private tail: Promise<unknown> = Promise.resolve();

  /** Runs `work` after everything asked before it; settles as `work` does. */
  run<T>(work: () => Promise<T>): Promise<T> {
    const done = this.tail.then(work);
    this.tail = done.catch(() => {});
    return done;
  }
}
