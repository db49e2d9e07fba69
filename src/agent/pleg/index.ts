// PLEG: turns changes of container states in the runtime into pod lifecycle events for the
// sync loop, and keeps the pod cache that pod workers read.

export { createPodCache, type PodCache } from "./cache.ts";
export type { PodLifecycleEvent, RelistPod } from "./diff.ts";
export { createPLEG, type PLEGDeps, type RelistStats } from "./generic.ts";
export { createListingCache, type ListingCache } from "./listing.ts";
export { createBoundedQueue } from "./queue.ts";
