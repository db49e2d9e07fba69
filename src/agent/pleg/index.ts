// PLEG: turns changes of container states in the runtime into pod lifecycle events for the
// sync loop, and keeps the pod cache that pod workers read.

export { type CacheEntry, createPodCache, type PodCache } from "./cache.ts";
export {
  computeEvents,
  type PodLifecycleEvent,
  type PodLifecycleEventType,
  type RelistPod,
} from "./diff.ts";
export {
  createPLEG,
  DEFAULT_EVENT_CAPACITY,
  DEFAULT_RELIST_THRESHOLD_MS,
  type PLEG,
  type PLEGDeps,
  type RelistStats,
} from "./generic.ts";
export { createListingCache, type ListingCache } from "./listing.ts";
export { type BoundedQueue, createBoundedQueue } from "./queue.ts";
export {
  createRuntimeEventWatch,
  type RuntimeEventWatch,
  type RuntimeEventWatchDeps,
} from "./runtime-events.ts";
