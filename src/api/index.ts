// The public surface of src/api: Kubernetes-shaped types, manifest validation, defaults,
// quantities, QoS and durations.

export {
  applyContainerDefaults,
  applyPodDefaults,
  type ContainerDefaultsOptions,
  DEFAULT_NAMESPACE,
  DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS,
  DEFAULT_TERMINATION_MESSAGE_PATH,
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
  isDNS1123Label,
  isDNS1123Subdomain,
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
