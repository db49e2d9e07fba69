// The runtime's last pod listing, shared: PLEG lists afresh on every relist, and readers that
// can use a listing up to `maxAgeMs` old (housekeeping) take PLEG's instead of listing again.
// Listing every pod and container is the largest steady cost of the agent with many pods.
import type { Clock } from "../../util/clock.ts";

export interface ListingCache<T> {
  /** Lists the runtime now and keeps the result. */
  fresh(): Promise<T[]>;
  /** The kept listing when it was taken at most maxAgeMs ago, else a fresh one. */
  recent(): Promise<T[]>;
}

export function createListingCache<T>(
  list: () => Promise<T[]>,
  clock: Clock,
  maxAgeMs: number,
): ListingCache<T> {
  let kept: { at: number; items: T[] } | undefined;
  const fresh = async () => {
    const at = clock.monotonic();
    const items = await list();
    if (kept === undefined || at >= kept.at) kept = { at, items };
    return items;
  };
  return {
    fresh,
    recent: () =>
      kept !== undefined && clock.monotonic() - kept.at <= maxAgeMs
        ? Promise.resolve(kept.items)
        : fresh(),
  };
}
