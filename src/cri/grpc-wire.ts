// gRPC over HTTP/2, the parts that do not depend on the HTTP/2 implementation: the error type
// both transports reject with, the status of a response that carries none, the deadline header,
// and the 5-byte message framing (read incrementally, so that a server stream's messages are
// handed over as they arrive).

import { GrpcStatus } from "./errors.ts";
import type { H2Address } from "./h2.ts";
import { H2_CANCEL, H2_ENHANCE_YOUR_CALM, H2_REFUSED_STREAM } from "./h2-frame.ts";

/** The header block limit for peers on a local socket (the runtime, device plugins): they run
 * as root like the agent, and the longest header they send is an error message (a pull
 * failure carries the registry's answer), kilobytes at most; 1 MiB bounds a broken one and is
 * still below grpc-go's default of 16 MiB. */
export const LOCAL_PEER_HEADER_BYTES = 1 << 20;

/** A call that failed, with its gRPC status code and the runtime's (or our) message. */
export class TransportError extends Error {
  override readonly name = "TransportError";
  constructor(
    readonly code: number,
    readonly details: string,
    options?: { cause?: unknown },
  ) {
    super(details, options);
  }
}

/** The gRPC status of an HTTP response that carries none (the gRPC HTTP/2 mapping). */
export function statusOfHttp(httpStatus: number): number {
  switch (httpStatus) {
    case 400:
      return GrpcStatus.INTERNAL;
    case 401:
      return GrpcStatus.UNAUTHENTICATED;
    case 403:
      return GrpcStatus.PERMISSION_DENIED;
    case 404:
      return GrpcStatus.UNIMPLEMENTED;
    case 429:
    case 502:
    case 503:
    case 504:
      return GrpcStatus.UNAVAILABLE;
    default:
      return GrpcStatus.UNKNOWN;
  }
}

/** The gRPC status of a stream the peer reset. */
export function statusOfReset(rstCode: number): number {
  switch (rstCode) {
    case H2_REFUSED_STREAM:
      return GrpcStatus.UNAVAILABLE;
    case H2_CANCEL:
      return GrpcStatus.CANCELLED;
    case H2_ENHANCE_YOUR_CALM:
      return GrpcStatus.RESOURCE_EXHAUSTED;
    default:
      return GrpcStatus.INTERNAL;
  }
}

/** The `grpc-timeout` header value for a deadline: at most 8 digits, as the protocol says. */
export function grpcTimeout(ms: number): string {
  const whole = Math.max(0, Math.ceil(ms));
  if (whole < 1e8) return `${whole}m`;
  const seconds = Math.ceil(whole / 1000);
  return seconds < 1e8 ? `${seconds}S` : `${Math.ceil(seconds / 3600)}H`;
}

/** `grpc-message` is percent-encoded; a value that does not decode is shown as sent. */
export function decodeGrpcMessage(raw: unknown): string {
  const text = Array.isArray(raw) ? raw.join(", ") : typeof raw === "string" ? raw : "";
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** A `grpc-message` value: UTF-8, with bytes outside printable ASCII and "%" percent-encoded. */
export function encodeGrpcMessage(text: string): string {
  let out = "";
  for (const byte of Buffer.from(text, "utf8")) {
    out +=
      byte >= 0x20 && byte <= 0x7e && byte !== 0x25
        ? String.fromCharCode(byte)
        : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

/** The milliseconds of a `grpc-timeout` value ("100m", "5S", "1H"...), or undefined when it
 * is not one. */
export function parseGrpcTimeout(value: string): number | undefined {
  const m = /^(\d{1,8})([HMSmun])$/.exec(value);
  if (m === null) return undefined;
  const n = Number(m[1]);
  const unitMs = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 1e-3, n: 1e-6 }[m[2] as "H"];
  return n * unitMs;
}

/** One message with its 5-byte gRPC header (uncompressed). */
export function frameMessage(message: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(5 + message.length);
  out[0] = 0;
  out.writeUInt32BE(message.length, 1);
  out.set(message, 5);
  return out;
}

/** Several messages, each with its 5-byte gRPC header, one after the other. */
export function frameMessages(messages: readonly Uint8Array[]): Buffer {
  let size = 0;
  for (const m of messages) size += 5 + m.length;
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  for (const m of messages) {
    out[at] = 0;
    out.writeUInt32BE(m.length, at + 1);
    out.set(m, at + 5);
    at += 5 + m.length;
  }
  return out;
}

const EMPTY = Buffer.alloc(0);

/**
 * Splits a response body into its gRPC messages as the body arrives. push() returns the
 * messages completed by a chunk, or a TransportError for a compressed message (none was offered)
 * or one larger than `maxBytes`; after an error it must not be used again. finish() says whether
 * the body ended between messages.
 */
export class MessageReader {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  /** Length of the message being read, once its header is in. */
  private need = -1;

  constructor(private readonly maxBytes: number) {}

  push(chunk: Buffer): Buffer[] | TransportError {
    this.pending.push(chunk);
    this.pendingBytes += chunk.length;
    const out: Buffer[] = [];
    for (;;) {
      if (this.need < 0) {
        if (this.pendingBytes < 5) return out;
        const head = this.take(5);
        if (head[0] !== 0) {
          return new TransportError(
            GrpcStatus.INTERNAL,
            "the server sent a compressed message though no compression was offered",
          );
        }
        this.need = head.readUInt32BE(1);
        if (this.need > this.maxBytes) {
          return new TransportError(
            GrpcStatus.RESOURCE_EXHAUSTED,
            `response larger than the limit of ${this.maxBytes} bytes`,
          );
        }
      }
      if (this.pendingBytes < this.need) return out;
      out.push(this.take(this.need));
      this.need = -1;
    }
  }

  /** undefined when the body ended between two messages, else what is wrong with it. */
  finish(): string | undefined {
    if (this.need >= 0) return "shorter than its header says";
    if (this.pendingBytes > 0) return "a truncated message header";
    return undefined;
  }

  /** The next `n` buffered bytes (n <= pendingBytes), without copying when one chunk has them. */
  private take(n: number): Buffer {
    if (n === 0) return EMPTY;
    const first = this.pending[0] as Buffer;
    let out: Buffer;
    if (first.length >= n) {
      out = first.subarray(0, n);
      if (first.length === n) this.pending.shift();
      else this.pending[0] = first.subarray(n);
    } else {
      out = Buffer.allocUnsafe(n);
      let at = 0;
      while (at < n) {
        const chunk = this.pending[0] as Buffer;
        const part = Math.min(chunk.length, n - at);
        chunk.copy(out, at, 0, part);
        at += part;
        if (part === chunk.length) this.pending.shift();
        else this.pending[0] = chunk.subarray(part);
      }
    }
    this.pendingBytes -= n;
    return out;
  }
}

/** What a transport does with one call: unary calls resolve with one message, server streams
 * hand over each message as it arrives. */
export interface ServerStreamHandler {
  /** One message of the stream. */
  onMessage(message: Buffer): void;
  /** The stream ended: with the runtime's OK (no argument) or an error. Called once; nothing
   * is called after it. */
  onEnd(error?: TransportError): void;
}

/** A gRPC client transport to one server. */
export interface GrpcTransport {
  /** Sends one message to `path` ("/runtime.v1.RuntimeService/ListContainers") and resolves with
   * the response message, or rejects with a TransportError. */
  call(path: string, message: Uint8Array, timeoutMs: number, signal?: AbortSignal): Promise<Buffer>;
  /** Opens a server-streaming call to `path` with one request message; it has no deadline and
   * runs until the runtime ends it, the connection is lost, or `signal` aborts it (then onEnd
   * gets CANCELLED). */
  serverStream(
    path: string,
    message: Uint8Array,
    handler: ServerStreamHandler,
    signal?: AbortSignal,
  ): void;
  /** Opens a call that sends every message of `messages` at once, then ends its side (a
   * client or bidirectional stream whose requests do not wait for answers, such as containerd's
   * content writes); each response message goes to the handler as it arrives. No deadline of
   * its own: `signal` bounds it, as for serverStream. */
  sendAll(
    path: string,
    messages: readonly Uint8Array[],
    handler: ServerStreamHandler,
    signal?: AbortSignal,
  ): void;
  /** Closes the connection; calls and streams in flight fail with CANCELLED. */
  close(): void;
}

export interface GrpcTransportOptions {
  /** The server: a unix socket (absolute path) or a TCP host and port (h2c, no TLS). */
  address: H2Address;
  /** The :authority of requests. Default "localhost". */
  authority?: string;
  /** Largest response message accepted (bytes). */
  maxReceiveBytes: number;
  /** HTTP/2 flow-control window for the session and each stream (bytes). */
  windowBytes: number;
  /** Largest header block (headers or trailers) accepted from the server, encoded or decoded
   * (bytes); a larger one closes the connection. */
  maxHeaderListBytes: number;
  /** Request headers (gRPC metadata) sent with every call, e.g. containerd's
   * `containerd-namespace`; lower-case names. */
  metadata?: readonly (readonly [string, string])[];
}
