// PLEG: turns changes of container states in the runtime into pod lifecycle events for the
// sync loop, and keeps the pod cache that pod workers read.

export type { PodLifecycleEvent, RelistPod } from "./diff.ts";
export { createPLEG, type PLEGDeps, type RelistStats } from "./generic.ts";
export { createListingCache } from "./listing.ts";
export { createBoundedQueue } from "./queue.ts";
export { createRuntimeEventWatch } from "./runtime-events.ts";
