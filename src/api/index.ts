// The public surface of src/api: Kubernetes-shaped types, manifest validation, defaults,
// quantities, QoS and durations.

export {
  applyContainerDefaults,
  applyPodDefaults,
  DEFAULT_NAMESPACE,
  DEFAULT_VOLUME_FILE_MODE,
  defaultPullPolicy,
} from "./defaults.ts";
export {
  DurationParseError,
  humanDuration,
  parseDuration,
  shortHumanDuration,
} from "./duration.ts";
export { isExtendedResourceName } from "./extended-resources.ts";
export { type FieldError, formatFieldError, formatInvalidObject } from "./field-error.ts";
export {
  type NodeAllocatable,
  type PodFieldContext,
  podFieldValue,
  resourceFieldValue,
} from "./fieldpath.ts";
export { isDNS1123Subdomain, isEnvVarName, isQualifiedName, isValidLabelValue } from "./names.ts";
export { getPodQOS } from "./qos.ts";
export {
  addQuantity,
  compareQuantity,
  cpuToMilli,
  formatQuantity,
  integerValue,
  memoryToBytes,
  milliValue,
  parseQuantity,
  QuantityParseError,
  tryParseQuantity,
} from "./quantity.ts";
export { objectMetaSchema, podManifestSchema, validatePod } from "./schema.ts";
export type * from "./types.ts";
export {
  DOCKER_CONFIG_JSON_KEY,
  DOCKERCFG_KEY,
  SECRET_TYPE_DOCKER_CONFIG_JSON,
  SECRET_TYPE_DOCKERCFG,
} from "./types-config.ts";
export {
  decodeBase64Strict,
  validateConfigMap,
  validateImmutableUpdate,
  validateSecret,
} from "./validate-objects.ts";
