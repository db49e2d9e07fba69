// The agent's pod sources and what they bring: the static pod folder (file source); PodConfig,
// which merges the sources' pods into ADD/UPDATE/REMOVE/... updates for the sync loop; and the
// object store, which merges their ConfigMaps and Secrets for volumes, env and image pulls.

export { createFileSource, type FileSourceDeps, type ManifestProblem } from "./file-source.ts";
export { createHubPodSource, decodeDesired } from "./hub-source.ts";
export {
  createObjectStore,
  type ObjectConflict,
  type ObjectLookup,
  type ObjectStore,
  objectsUsedBy,
} from "./object-store.ts";
export { CONFIG_SOURCE_ANNOTATION, type ConfigObject, parseManifestFile } from "./parse.ts";
export { createPodConfig, type PodConfig, type PodConflict, type PodUpdate } from "./pod-config.ts";
