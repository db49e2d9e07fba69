// The rules of RFC 9113 that a frame's type, flags, stream and length must keep whatever the
// connection's state: which frames belong to a stream and which to the connection, the fixed
// sizes of control frames, and that nobody pushes (push is off on both our ends). A frame that
// breaks one is a connection error; what a frame means is the session's (h2-session.ts).

import {
  FLAG_ACK,
  FRAME_DATA,
  FRAME_GOAWAY,
  FRAME_HEADERS,
  FRAME_PING,
  FRAME_PRIORITY,
  FRAME_PUSH_PROMISE,
  FRAME_RST_STREAM,
  FRAME_SETTINGS,
  FRAME_WINDOW_UPDATE,
  H2_COMPRESSION_ERROR,
  H2_FRAME_SIZE_ERROR,
  H2_PROTOCOL_ERROR,
  H2Error,
} from "./h2-frame.ts";
import { HeaderListTooLarge, HpackError } from "./hpack.ts";

/** Frames that name a stream (never stream 0), by type. */
const STREAM_FRAMES: Readonly<Record<number, string>> = {
  [FRAME_DATA]: "DATA",
  [FRAME_HEADERS]: "HEADERS",
  [FRAME_RST_STREAM]: "RST_STREAM",
};

/** Frames of the connection (stream 0 only), by type. */
const CONNECTION_FRAMES: Readonly<Record<number, string>> = {
  [FRAME_SETTINGS]: "SETTINGS",
  [FRAME_PING]: "PING",
  [FRAME_GOAWAY]: "GOAWAY",
};

/** Payload sizes fixed by the RFC: [type, its name, the size, or the least size]. */
const SIZES: readonly [number, string, number, "exactly" | "at least"][] = [
  [FRAME_RST_STREAM, "RST_STREAM", 4, "exactly"],
  [FRAME_PING, "PING", 8, "exactly"],
  [FRAME_WINDOW_UPDATE, "WINDOW_UPDATE", 4, "exactly"],
  [FRAME_PRIORITY, "PRIORITY", 5, "exactly"],
  [FRAME_GOAWAY, "GOAWAY", 8, "at least"],
];

/** Throws H2Error for a frame that breaks a rule of its type; `peer` names the sender. */
export function checkFrame(type: number, flags: number, id: number, length: number, peer: string) {
  const streamType = STREAM_FRAMES[type];
  if (streamType !== undefined && id === 0) {
    throw new H2Error(H2_PROTOCOL_ERROR, `${streamType} on stream 0`);
  }
  const connectionType = CONNECTION_FRAMES[type];
  if (connectionType !== undefined && id !== 0) {
    throw new H2Error(H2_PROTOCOL_ERROR, `${connectionType} on stream ${id}`);
  }
  for (const [t, name, size, rule] of SIZES) {
    if (t !== type) continue;
    if (rule === "exactly" ? length !== size : length < size) {
      throw new H2Error(H2_FRAME_SIZE_ERROR, `a ${name} of ${length} bytes (${rule} ${size})`);
    }
  }
  if (type === FRAME_SETTINGS && flags & FLAG_ACK && length !== 0) {
    throw new H2Error(H2_FRAME_SIZE_ERROR, "a SETTINGS ACK with a body");
  }
  if (type === FRAME_PUSH_PROMISE) {
    throw new H2Error(H2_PROTOCOL_ERROR, `the ${peer} pushed a stream though push is off`);
  }
}

/** The GOAWAY code of a connection error thrown while reading frames, and what kind it is. */
export function connectionError(err: unknown): { code: number; why: string } {
  if (err instanceof H2Error) return { code: err.code, why: "protocol error" };
  if (err instanceof HpackError)
    return { code: H2_COMPRESSION_ERROR, why: "header compression error" };
  if (err instanceof HeaderListTooLarge)
    return { code: H2_COMPRESSION_ERROR, why: "protocol error" };
  return { code: H2_PROTOCOL_ERROR, why: "protocol error" };
}
