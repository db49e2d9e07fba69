// gRPC through @grpc/grpc-js (over Bun's node:http2), behind the same GrpcTransport interface as
// our own HTTP/2 client (transport.ts), so that the two can be measured side by side
// (docs/grpc-stack.md). Messages pass through as bytes: the CRI codec encodes and decodes them.

import { Client, credentials, Metadata, type ServiceError } from "@grpc/grpc-js";
import { GrpcStatus } from "./errors.ts";
import {
  type GrpcTransport,
  type GrpcTransportOptions,
  type ServerStreamHandler,
  TransportError,
} from "./grpc-wire.ts";

const asIs = (b: Buffer) => b;
const bytes = (b: Uint8Array) => (Buffer.isBuffer(b) ? b : Buffer.from(b));

function transportError(err: ServiceError): TransportError {
  const code = typeof err.code === "number" ? err.code : GrpcStatus.UNKNOWN;
  return new TransportError(code, err.details || err.message, { cause: err });
}

export function createGrpcJsTransport(options: GrpcTransportOptions): GrpcTransport {
  const client = new Client(`unix:${options.socketPath}`, credentials.createInsecure(), {
    "grpc.max_receive_message_length": options.maxReceiveBytes,
    "grpc.enable_channelz": 0,
    "grpc.enable_retries": 0,
    // A local runtime that restarts is back within a second or two: try again that soon.
    "grpc.initial_reconnect_backoff_ms": 100,
    "grpc.max_reconnect_backoff_ms": 1000,
  });
  let closed = false;
  const inflight = new Set<{ cancel(): void }>();
  const cancelled = () => new TransportError(GrpcStatus.CANCELLED, "the client is closed");

  return {
    call(path, message, timeoutMs, signal) {
      return new Promise<Buffer>((resolve, reject) => {
        if (closed) return reject(cancelled());
        const call = client.makeUnaryRequest(
          path,
          bytes,
          asIs,
          message,
          new Metadata(),
          { deadline: Date.now() + timeoutMs },
          (err, value) => {
            inflight.delete(call);
            signal?.removeEventListener("abort", onAbort);
            if (err) reject(closed ? cancelled() : transportError(err));
            else resolve(value as Buffer);
          },
        );
        const onAbort = () => call.cancel();
        inflight.add(call);
        signal?.addEventListener("abort", onAbort, { once: true });
      });
    },

    serverStream(path, message, handler: ServerStreamHandler, signal) {
      if (closed || signal?.aborted) {
        const why = closed ? "the client is closed" : "cancelled by the caller";
        handler.onEnd(new TransportError(GrpcStatus.CANCELLED, why));
        return;
      }
      const call = client.makeServerStreamRequest(path, bytes, asIs, message, new Metadata(), {});
      let ended = false;
      const end = (error?: TransportError) => {
        if (ended) return;
        ended = true;
        inflight.delete(call);
        signal?.removeEventListener("abort", onAbort);
        handler.onEnd(error);
      };
      const onAbort = () => call.cancel();
      call.on("data", (m: Buffer) => {
        if (!ended) handler.onMessage(m);
      });
      call.on("error", (err: ServiceError) => end(closed ? cancelled() : transportError(err)));
      call.on("status", (s: { code: number; details: string }) => {
        if (s.code === GrpcStatus.OK) end();
      });
      inflight.add(call);
      signal?.addEventListener("abort", onAbort, { once: true });
    },

    close() {
      if (closed) return;
      closed = true;
      for (const call of [...inflight]) call.cancel();
      client.close();
    },
  };
}
