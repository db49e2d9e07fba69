// The CRI layer: a typed client for a CRI runtime (containerd) over its unix socket, and an
// in-memory fake behind the same interface for unit tests; and the one gRPC stack of the binary
// (docs/grpc-stack.md), which the gRPC probe uses too.

export { type CriClient, createCriClient, defaultTimeoutFor } from "./client.ts";
export { parseCriEndpoint } from "./endpoint.ts";
export {
  CriError,
  criErrorCodeOf,
  criErrorFromGrpc,
  GrpcStatus,
  isCancelled,
  isCriError,
  isDeadlineExceeded,
  isNotFound,
  isUnavailable,
  isUnimplemented,
} from "./errors.ts";
export type {
  ContainerEvent,
  ContainerEventHandler,
  ContainerEventSource,
  ContainerEvents,
} from "./events.ts";
export { createFakeRuntime, FakeRuntime } from "./fake.ts";
export { normalizeImageRef } from "./fake-support.ts";
export { TransportError } from "./grpc-wire.ts";
export { addressText } from "./h2.ts";
export { CRI_PACKAGE } from "./proto.ts";
export { CRI_RPCS } from "./service.ts";
export { createH2Transport } from "./transport.ts";
export type * from "./types.ts";
