// What a contract suite of one of the hub's stores runs on: `backing()` makes a new, empty place
// (a file, a database) and gives a function that opens a store on it; each call opens it again,
// as a restarted hub would. Shared by the suites of the stores beside the fleet's own
// (deploy, node updates, agent rollouts, audit).

export interface Backing<S> {
  open(): Promise<S>;
  /** Closes what open() opened and removes the backing. */
  remove(): Promise<void>;
}

/** A test body run on a new backing, removed after it. */
export function onBacking<S>(
  backing: () => Promise<Backing<S>>,
  fn: (open: () => Promise<S>) => Promise<void>,
): () => Promise<void> {
  return async () => {
    const b = await backing();
    try {
      await fn(() => b.open());
    } finally {
      await b.remove();
    }
  };
}
