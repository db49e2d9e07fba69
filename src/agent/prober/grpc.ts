// The grpc probe handler: one call of grpc.health.v1.Health/Check on a new connection, closed
// after the call, through fleetlet's own gRPC stack (docs/grpc-stack.md). The two messages are
// encoded by hand from their public definitions:
//   message HealthCheckRequest { string service = 1; }
//   message HealthCheckResponse { ServingStatus status = 1; }  // UNKNOWN 0, SERVING 1,
//                                                              // NOT_SERVING 2, SERVICE_UNKNOWN 3

import { addressText, createH2Transport, GrpcStatus, TransportError } from "../../cri/index.ts";
import type { ProbeOutcome } from "./types.ts";

// A probe's peer is a pod: anyone's code, so what it can make the agent hold is kept to what a
// health check needs. A HealthCheckResponse is 2 bytes; its headers and trailers are under
// 200 bytes, an error's grpc-message a few hundred more. A probe may run for every container
// every second, so these bound the agent's memory per probe in flight, not only per call.
/** The largest header block a probe target may send (grpc-go's default is 16 MiB). */
const PROBE_HEADER_BYTES = 16 * 1024;
/** The largest response message, and the HTTP/2 window, of a probe. */
const PROBE_MESSAGE_BYTES = 64 * 1024;

export const HEALTH_CHECK_PATH = "/grpc.health.v1.Health/Check";
const SERVING_STATUS = ["UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"] as const;

function varint(n: number): number[] {
  const out: number[] = [];
  let v = n;
  while (v > 0x7f) {
    out.push((v & 0x7f) | 0x80);
    v >>>= 7;
  }
  out.push(v);
  return out;
}

function encodeHealthCheckRequest(service: string): Buffer {
  if (service === "") return Buffer.alloc(0);
  const bytes = Buffer.from(service, "utf8");
  return Buffer.concat([Buffer.from([0x0a, ...varint(bytes.length)]), bytes]);
}

/** Reads field 1 (varint) of a HealthCheckResponse; skips other fields. */
function decodeHealthCheckResponse(buf: Buffer): number {
  let at = 0;
  let result = 0;
  const readVarint = () => {
    let v = 0;
    let shift = 0;
    for (;;) {
      const b = buf[at++];
      if (b === undefined) throw new Error("truncated HealthCheckResponse");
      v += (b & 0x7f) * 2 ** shift;
      if ((b & 0x80) === 0) return v;
      shift += 7;
    }
  };
  while (at < buf.length) {
    const tag = readVarint();
    const wire = tag & 7;
    if (wire === 0) {
      const v = readVarint();
      if (tag >> 3 === 1) result = v;
    } else if (wire === 2) at += readVarint();
    else if (wire === 1) at += 8;
    else if (wire === 5) at += 4;
    else throw new Error(`unexpected wire type ${wire} in HealthCheckResponse`);
  }
  return result;
}

export function encodeHealthCheckResponse(code: number): Buffer {
  return code === 0 ? Buffer.alloc(0) : Buffer.from([0x08, ...varint(code)]);
}

/** Decodes a HealthCheckRequest's service (field 1). */
export function decodeHealthCheckRequest(buf: Buffer): string {
  if (buf.length === 0 || buf[0] !== 0x0a) return "";
  let len = 0;
  let shift = 0;
  let at = 1;
  for (;;) {
    const b = buf[at++] ?? 0;
    len += (b & 0x7f) * 2 ** shift;
    if ((b & 0x80) === 0) break;
    shift += 7;
  }
  return buf.subarray(at, at + len).toString("utf8");
}

function failureText(err: TransportError, addr: string, timeoutMs: number): string {
  if (err.code === GrpcStatus.UNIMPLEMENTED) {
    return `this server does not implement the grpc health protocol (grpc.health.v1.Health): ${err.details}`;
  }
  if (err.code === GrpcStatus.DEADLINE_EXCEEDED) {
    return `timeout: health rpc to ${addr} did not complete within ${timeoutMs / 1000}s`;
  }
  if (err.code === GrpcStatus.UNAVAILABLE) {
    return `failed to connect service ${JSON.stringify(addr)} within ${timeoutMs / 1000}s: ${err.details}`;
  }
  return `error: health rpc probe failed: ${err.details}`;
}

/** One Health/Check call on a new connection (h2c: HTTP/2 without TLS), closed after it. */
export async function probeGRPC(
  host: string,
  port: number,
  service: string,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<ProbeOutcome> {
  const address = { hostname: host, port };
  const addr = addressText(address);
  const transport = createH2Transport({
    address,
    authority: addr,
    maxReceiveBytes: PROBE_MESSAGE_BYTES,
    windowBytes: PROBE_MESSAGE_BYTES,
    maxHeaderListBytes: PROBE_HEADER_BYTES,
  });
  try {
    const request = encodeHealthCheckRequest(service);
    const code = decodeHealthCheckResponse(
      await transport.call(HEALTH_CHECK_PATH, request, timeoutMs, signal),
    );
    if (code === 1) return { result: "success", output: "" };
    const name = SERVING_STATUS[code] ?? String(code);
    return {
      result: "failure",
      output: `service unhealthy (responded with ${JSON.stringify(name)})`,
    };
  } catch (err) {
    if (err instanceof TransportError) {
      return { result: "failure", output: failureText(err, addr, timeoutMs) };
    }
    return {
      result: "failure",
      output: `error: health rpc probe failed: ${(err as Error).message}`,
    };
  } finally {
    transport.close();
  }
}
