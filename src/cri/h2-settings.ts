// The peer's SETTINGS (RFC 9113 6.5), checked as the RFC says: a value out of its range is a
// connection error, never something we act on.

import {
  H2_FLOW_CONTROL_ERROR,
  H2_FRAME_SIZE_ERROR,
  H2_PROTOCOL_ERROR,
  H2Error,
  MAX_FRAME,
  MAX_FRAME_LIMIT,
  MAX_WINDOW,
  SETTINGS_ENABLE_PUSH,
  SETTINGS_INITIAL_WINDOW_SIZE,
  SETTINGS_MAX_CONCURRENT_STREAMS,
  SETTINGS_MAX_FRAME_SIZE,
} from "./h2-frame.ts";

/** What the peer's SETTINGS let us do. */
export interface PeerSettings {
  /** The send window of each new stream (SETTINGS_INITIAL_WINDOW_SIZE). */
  initialWindow: number;
  /** The largest frame we may send it (SETTINGS_MAX_FRAME_SIZE). */
  maxFrame: number;
  /** Streams we may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS; unlimited until said). */
  maxConcurrentStreams: number;
}

/** Applies one SETTINGS frame's payload to `peer`; returns how much each open stream's send
 * window changes (the new initial window less the old). Throws H2Error for a bad frame. */
export function applySettings(peer: PeerSettings, payload: Buffer, peerName: string): number {
  if (payload.length % 6 !== 0) {
    throw new H2Error(H2_FRAME_SIZE_ERROR, `a SETTINGS frame of ${payload.length} bytes`);
  }
  let delta = 0;
  for (let at = 0; at < payload.length; at += 6) {
    const key = payload.readUInt16BE(at);
    const value = payload.readUInt32BE(at + 2);
    switch (key) {
      case SETTINGS_ENABLE_PUSH:
        if (value > 1) throw outOfRange("SETTINGS_ENABLE_PUSH", value);
        if (value === 1 && peerName === "server") throw outOfRange("SETTINGS_ENABLE_PUSH", value);
        break;
      case SETTINGS_INITIAL_WINDOW_SIZE:
        if (value > MAX_WINDOW) {
          throw new H2Error(
            H2_FLOW_CONTROL_ERROR,
            `SETTINGS_INITIAL_WINDOW_SIZE ${value} > 2^31-1`,
          );
        }
        delta += value - peer.initialWindow;
        peer.initialWindow = value;
        break;
      case SETTINGS_MAX_FRAME_SIZE:
        if (value < MAX_FRAME || value > MAX_FRAME_LIMIT) {
          throw outOfRange("SETTINGS_MAX_FRAME_SIZE", value);
        }
        peer.maxFrame = value;
        break;
      case SETTINGS_MAX_CONCURRENT_STREAMS:
        peer.maxConcurrentStreams = value;
        break;
      default:
        // HEADER_TABLE_SIZE limits the peer's decoder table, which our encoder never adds to;
        // MAX_HEADER_LIST_SIZE is advisory and our header blocks are small; others are unknown.
        break;
    }
  }
  return delta;
}

function outOfRange(name: string, value: number): H2Error {
  return new H2Error(H2_PROTOCOL_ERROR, `${name} ${value} is out of range`);
}
