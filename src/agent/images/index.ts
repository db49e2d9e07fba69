// The image manager: pull policy, per-image pull backoff and registry credentials, in front of
// the CRI image service; and the image GC beside it (gc.ts), with Node.status.images.

export {
  findCredential,
  loadDockerConfig,
  normalizeRegistryKey,
  parseDockerConfig,
  type RegistryCredential,
} from "./credentials.ts";
export { createImageGC, type ImageGC, type ImageGCDeps, type ImagesFreed } from "./gc.ts";
export {
  bytesToFree,
  detectImages,
  evictionOrder,
  type ImageGCPolicy,
  type ImageUse,
  type TrackedImage,
  tooOld,
  tooYoung,
  usagePercent,
} from "./gc-plan.ts";
export { ImageRecordStore, loadImageRecords, RECORD_SAVE_GRANULARITY_MS } from "./gc-records.ts";
export {
  createImageManager,
  type EnsureImageOptions,
  type EnsureImageResult,
  formatElapsed,
  type ImageErrorReason,
  type ImageManager,
  type ImageManagerDeps,
  type PodEventRecorder,
} from "./manager.ts";
export { imageListForStatus, MAX_NAMES_PER_IMAGE } from "./node-images.ts";
export {
  aggregateErrors,
  type PodPullCredentials,
  podPullCredentials,
  pullAuths,
} from "./pull-secrets.ts";
export {
  type ImageReference,
  InvalidImageReferenceError,
  parseImageReference,
} from "./reference.ts";
