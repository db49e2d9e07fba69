// The image manager: pull policy, per-image pull backoff and registry credentials, in front of
// the CRI image service; and the image GC beside it (gc.ts), with Node.status.images.

export { findCredential, parseDockerConfig } from "./credentials.ts";
export { createImageGC, type ImageGC, type ImagesFreed } from "./gc.ts";
export {
  bytesToFree,
  detectImages,
  evictionOrder,
  type ImageUse,
  type TrackedImage,
  tooOld,
  usagePercent,
} from "./gc-plan.ts";
export { RECORD_SAVE_GRANULARITY_MS } from "./gc-records.ts";
export { imageFsMountpoint } from "./image-fs.ts";
export {
  createImageManager,
  formatElapsed,
  type ImageManager,
  type PodEventRecorder,
} from "./manager.ts";
export { imageListForStatus } from "./node-images.ts";
export { createPullLeases, type PullLeases } from "./pull-leases.ts";
export { podPullCredentials } from "./pull-secrets.ts";
export type { PullProgressSource } from "./pull-watch.ts";
export type { PullSettings } from "./puller.ts";
export { parseImageReference } from "./reference.ts";
