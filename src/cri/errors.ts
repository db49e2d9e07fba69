// Typed CRI errors. Callers branch on `code`; everything else is for people reading logs.
// This file imports no transport: the fake runtime and unit tests use it without a connection.

/**
 * What callers branch on:
 * - NotFound: the sandbox, container or image does not exist (or no longer does).
 * - Unavailable: the runtime cannot be reached (not running, restarting, socket missing).
 * - DeadlineExceeded: no answer within the call's deadline; the operation may still happen.
 * - Cancelled: the caller aborted the call through its AbortSignal.
 * - Unimplemented: the runtime does not implement the RPC (older containerd).
 * - Other: the runtime refused or failed the operation; read the message.
 */
export type CriErrorCode =
  | "NotFound"
  | "Unavailable"
  | "DeadlineExceeded"
  | "Cancelled"
  | "Unimplemented"
  | "Other";

/** gRPC status codes. */
export const GrpcStatus = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const;

const STATUS_NAMES = Object.fromEntries(
  Object.entries(GrpcStatus).map(([name, num]) => [num, name]),
) as Record<number, string>;

function grpcStatusName(status: number): string {
  return STATUS_NAMES[status] ?? `STATUS_${status}`;
}

export function criErrorCodeOf(grpcStatus: number): CriErrorCode {
  switch (grpcStatus) {
    case GrpcStatus.NOT_FOUND:
      return "NotFound";
    case GrpcStatus.UNAVAILABLE:
      return "Unavailable";
    case GrpcStatus.DEADLINE_EXCEEDED:
      return "DeadlineExceeded";
    case GrpcStatus.CANCELLED:
      return "Cancelled";
    case GrpcStatus.UNIMPLEMENTED:
      return "Unimplemented";
    default:
      return "Other";
  }
}

export interface CriErrorInit {
  /** The RPC name, e.g. "RunPodSandbox". */
  rpc: string;
  /** The gRPC status code of the failure. */
  grpcStatus: number;
  /** What the runtime (or the transport, for connection failures) said. */
  runtimeMessage: string;
  /** Extra context placed before the runtime's message, e.g. the endpoint. */
  context?: string;
  cause?: unknown;
}

export class CriError extends Error {
  override readonly name = "CriError";
  readonly code: CriErrorCode;
  readonly grpcStatus: number;
  readonly rpc: string;
  readonly runtimeMessage: string;

  constructor(init: CriErrorInit) {
    const detail = init.runtimeMessage || grpcStatusName(init.grpcStatus);
    const prefix = init.context ? `${init.context}: ` : "";
    super(`CRI ${init.rpc} failed: ${prefix}${detail}`, { cause: init.cause });
    this.code = criErrorCodeOf(init.grpcStatus);
    this.grpcStatus = init.grpcStatus;
    this.rpc = init.rpc;
    this.runtimeMessage = init.runtimeMessage;
  }
}

/** A gRPC status as the transport (TransportError) or grpc-js (ServiceError) reports it. */
interface GrpcStatusLike {
  code?: number;
  details?: string;
  message?: string;
}

/** Turns a transport error (or anything thrown around a call) into a CriError. */
export function criErrorFromGrpc(rpc: string, err: unknown, context?: string): CriError {
  if (err instanceof CriError) return err;
  const s = (typeof err === "object" && err !== null ? err : {}) as GrpcStatusLike;
  const grpcStatus = typeof s.code === "number" ? s.code : GrpcStatus.UNKNOWN;
  const runtimeMessage = (s.details ?? s.message ?? String(err)).trim();
  return new CriError({ rpc, grpcStatus, runtimeMessage, context, cause: err });
}

function hasCode(err: unknown, code: CriErrorCode): boolean {
  return err instanceof CriError && err.code === code;
}

export const isCriError = (err: unknown): err is CriError => err instanceof CriError;
export const isNotFound = (err: unknown): err is CriError => hasCode(err, "NotFound");
export const isUnavailable = (err: unknown): err is CriError => hasCode(err, "Unavailable");
export const isDeadlineExceeded = (err: unknown): err is CriError =>
  hasCode(err, "DeadlineExceeded");
export const isCancelled = (err: unknown): err is CriError => hasCode(err, "Cancelled");
export const isUnimplemented = (err: unknown): err is CriError => hasCode(err, "Unimplemented");
