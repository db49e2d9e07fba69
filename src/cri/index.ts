// The CRI layer: a typed client for a CRI runtime (containerd) over its unix socket, and an
// in-memory fake behind the same interface for unit tests.

export {
  CRI_DEFAULT_TIMEOUT_MS,
  CRI_LIFECYCLE_TIMEOUT_MS,
  CRI_PULL_IMAGE_TIMEOUT_MS,
  type CriClient,
  type CriClientOptions,
  createCriClient,
  defaultTimeoutFor,
} from "./client.ts";
export { type CriEndpoint, parseCriEndpoint } from "./endpoint.ts";
export {
  CriError,
  type CriErrorCode,
  criErrorCodeOf,
  criErrorFromGrpc,
  GrpcStatus,
  grpcStatusName,
  isCancelled,
  isCriError,
  isDeadlineExceeded,
  isNotFound,
  isUnavailable,
  isUnimplemented,
} from "./errors.ts";
export {
  createFakeRuntime,
  type ExecResult,
  type FakeContainer,
  type FakeHook,
  FakeRuntime,
  type FakeRuntimeOptions,
  type FakeSandbox,
} from "./fake.ts";
export { normalizeImageRef } from "./fake-support.ts";
export { CRI_PACKAGE, criProtoText, loadCriPackageDefinition } from "./proto.ts";
export { CRI_RPCS, type CriMethod } from "./service.ts";
export type * from "./types.ts";
