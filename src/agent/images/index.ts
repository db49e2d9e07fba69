// The image manager: pull policy, per-image pull backoff and registry credentials, in front of
// the CRI image service. Image garbage collection will live here too.

export {
  findCredential,
  loadDockerConfig,
  normalizeRegistryKey,
  parseDockerConfig,
  type RegistryCredential,
} from "./credentials.ts";
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
