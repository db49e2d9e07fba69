// The agent's pod sources and what they bring: the static pod folder (file source); PodConfig,
// which merges the sources' pods into ADD/UPDATE/REMOVE/... updates for the sync loop; and the
// object store, which merges their ConfigMaps and Secrets for volumes, env and image pulls.

export {
  createFileSource,
  type FileSource,
  type FileSourceDeps,
  isIgnoredManifestName,
  MAX_MANIFEST_BYTES,
  type ManifestProblem,
} from "./file-source.ts";
export {
  createHubPodSource,
  type DesiredInput,
  type DesiredState,
  decodeDesired,
  type HubPodSource,
  type HubPodSourceDeps,
  makeHubPod,
} from "./hub-source.ts";
export {
  createObjectStore,
  type ObjectConflict,
  type ObjectLookup,
  type ObjectStore,
  type ObjectStoreDeps,
  objectsUsedBy,
} from "./object-store.ts";
export {
  CONFIG_HASH_ANNOTATION,
  CONFIG_MIRROR_ANNOTATION,
  CONFIG_SEEN_ANNOTATION,
  CONFIG_SOURCE_ANNOTATION,
  type ConfigObject,
  describeObject,
  type ManifestContext,
  objectKey,
  objectKeyOf,
  type ParseManifestResult,
  parseManifestFile,
  staticPodUID,
} from "./parse.ts";
export {
  createPodConfig,
  differSemantically,
  type PodConfig,
  type PodConfigDeps,
  type PodConflict,
  type PodOperation,
  type PodSourceName,
  type PodUpdate,
} from "./pod-config.ts";
export { PodUpdateQueue } from "./update-queue.ts";
export type { DirWatch, WatchDir } from "./watch.ts";
