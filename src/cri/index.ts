// The CRI layer: a typed client for a CRI runtime (containerd) over its unix socket, and an
// in-memory fake behind the same interface for unit tests; and the one gRPC stack of the binary
// (docs/grpc-stack.md), which the gRPC probe uses too.

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
  type ContainerEvent,
  type ContainerEventHandler,
  type ContainerEventKind,
  type ContainerEventSource,
  type ContainerEvents,
  CRI_NAMESPACE,
} from "./events.ts";
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
export {
  type GrpcTransport,
  type GrpcTransportOptions,
  type ServerStreamHandler,
  TransportError,
} from "./grpc-wire.ts";
export { addressText, type H2Address } from "./h2.ts";
export { CRI_PACKAGE } from "./proto.ts";
export { CRI_RPCS, type CriMethod } from "./service.ts";
export { createH2Transport } from "./transport.ts";
export type * from "./types.ts";
