// The public surface of src/api: Kubernetes-shaped types, manifest validation, defaults,
// quantities, QoS and durations.

export {
  applyContainerDefaults,
  applyPodDefaults,
  type ContainerDefaultsOptions,
  DEFAULT_NAMESPACE,
  DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS,
  DEFAULT_TERMINATION_MESSAGE_PATH,
  DEFAULT_VOLUME_FILE_MODE,
  defaultPullPolicy,
} from "./defaults.ts";
export {
  DurationParseError,
  humanDuration,
  parseDuration,
  shortHumanDuration,
} from "./duration.ts";
export {
  type FieldError,
  type FieldErrorType,
  FieldPath,
  formatFieldError,
  formatInvalidObject,
} from "./field-error.ts";
export {
  formatFieldMap,
  type NodeAllocatable,
  type PodFieldContext,
  podFieldValue,
  resourceFieldValue,
} from "./fieldpath.ts";
export {
  isConfigMapKey,
  isDNS1123Label,
  isDNS1123Subdomain,
  isEnvVarName,
  isQualifiedName,
  isValidIP,
  isValidLabelValue,
  isValidPortName,
} from "./names.ts";
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
  type Quantity,
  QuantityParseError,
  quantitySign,
  tryParseQuantity,
} from "./quantity.ts";
export {
  objectMetaSchema,
  podManifestSchema,
  type ValidatePodResult,
  validatePod,
} from "./schema.ts";
export type * from "./types.ts";
export {
  DOCKER_CONFIG_JSON_KEY,
  DOCKERCFG_KEY,
  SECRET_TYPE_DOCKER_CONFIG_JSON,
  SECRET_TYPE_DOCKERCFG,
  SECRET_TYPE_OPAQUE,
} from "./types-config.ts";
export {
  decodeBase64Strict,
  MAX_OBJECT_DATA_BYTES,
  type ValidateResult,
  validateConfigMap,
  validateImmutableUpdate,
  validateSecret,
} from "./validate-objects.ts";
