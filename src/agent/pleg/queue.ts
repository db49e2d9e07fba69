// A bounded FIFO with one or more async readers. A writer never waits: when the queue is full
// the item is dropped and counted, as kubelet does with PLEG events; the periodic relist and
// sync heal what was dropped.

export interface BoundedQueue<T> {
  /** Adds `item`, or drops it when full; returns false when dropped. */
  push(item: T): boolean;
  /** The oldest item, waiting for one if empty; rejects with the signal's reason on abort. */
  next(signal?: AbortSignal): Promise<T>;
  /** Yields items until `signal` aborts (then it returns, without throwing). */
  iterate(signal?: AbortSignal): AsyncIterableIterator<T>;
  /** Items waiting. */
  readonly size: number;
  /** Items dropped because the queue was full, since creation. */
  readonly dropped: number;
}

interface Reader<T> {
  resolve: (item: T) => void;
}

export function createBoundedQueue<T>(capacity: number): BoundedQueue<T> {
  if (!(capacity >= 1)) throw new RangeError(`queue capacity must be at least 1, got ${capacity}`);
  const items: T[] = [];
  const readers: Reader<T>[] = [];
  let dropped = 0;

  const next = (signal?: AbortSignal) =>
    new Promise<T>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      if (items.length > 0) return resolve(items.shift() as T);
      const reader: Reader<T> = {
        resolve: (item) => {
          signal?.removeEventListener("abort", onAbort);
          resolve(item);
        },
      };
      const onAbort = () => {
        const at = readers.indexOf(reader);
        if (at >= 0) readers.splice(at, 1);
        reject(signal?.reason);
      };
      readers.push(reader);
      signal?.addEventListener("abort", onAbort, { once: true });
    });

  async function* iterate(signal?: AbortSignal): AsyncIterableIterator<T> {
    while (!signal?.aborted) {
      try {
        yield await next(signal);
      } catch (error) {
        if (signal?.aborted) return;
        throw error;
      }
    }
  }

  return {
    push(item) {
      const reader = readers.shift();
      if (reader) {
        reader.resolve(item);
        return true;
      }
      if (items.length >= capacity) {
        dropped++;
        return false;
      }
      items.push(item);
      return true;
    },
    next,
    iterate,
    get size() {
      return items.length;
    },
    get dropped() {
      return dropped;
    },
  };
}
