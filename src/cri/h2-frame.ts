// HTTP/2 frame types, flags, settings and the frames the client builds (RFC 9113), for h2.ts.

export const FRAME_DATA = 0;
export const FRAME_HEADERS = 1;
export const FRAME_PRIORITY = 2;
export const FRAME_RST_STREAM = 3;
export const FRAME_SETTINGS = 4;
export const FRAME_PUSH_PROMISE = 5;
export const FRAME_PING = 6;
export const FRAME_GOAWAY = 7;
export const FRAME_WINDOW_UPDATE = 8;
export const FRAME_CONTINUATION = 9;

export const FLAG_END_STREAM = 0x1;
export const FLAG_ACK = 0x1;
export const FLAG_END_HEADERS = 0x4;
export const FLAG_PADDED = 0x8;
export const FLAG_PRIORITY = 0x20;

export const SETTINGS_ENABLE_PUSH = 2;
export const SETTINGS_MAX_CONCURRENT_STREAMS = 3;
export const SETTINGS_INITIAL_WINDOW_SIZE = 4;
export const SETTINGS_MAX_FRAME_SIZE = 5;
export const SETTINGS_MAX_HEADER_LIST_SIZE = 6;

/** HTTP/2 error codes (RST_STREAM and GOAWAY). */
export const H2_NO_ERROR = 0x0;
export const H2_PROTOCOL_ERROR = 0x1;
export const H2_FLOW_CONTROL_ERROR = 0x3;
export const H2_FRAME_SIZE_ERROR = 0x6;
export const H2_REFUSED_STREAM = 0x7;
export const H2_CANCEL = 0x8;
export const H2_COMPRESSION_ERROR = 0x9;
export const H2_ENHANCE_YOUR_CALM = 0xb;

export const DEFAULT_WINDOW = 65_535;
/** The largest flow-control window (2^31 - 1). */
export const MAX_WINDOW = 0x7fffffff;
/** The largest frame we accept (the default SETTINGS_MAX_FRAME_SIZE, which we keep). */
export const MAX_FRAME = 16_384;
/** The largest SETTINGS_MAX_FRAME_SIZE a peer may announce (2^24 - 1). */
export const MAX_FRAME_LIMIT = 0xffffff;
export const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");
export const MAX_STREAM_ID = 0x7fffffff;

export function frame(type: number, flags: number, id: number, payload: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(9 + payload.length);
  out.writeUIntBE(payload.length, 0, 3);
  out[3] = type;
  out[4] = flags;
  out.writeUInt32BE(id, 5);
  out.set(payload, 9);
  return out;
}

export function windowUpdate(id: number, increment: number): Buffer {
  const payload = Buffer.allocUnsafe(4);
  payload.writeUInt32BE(increment, 0);
  return frame(FRAME_WINDOW_UPDATE, 0, id, payload);
}

/** A connection error (RFC 9113 5.4.1): the connection is closed with GOAWAY `code`. */
export class H2Error extends Error {
  override readonly name = "H2Error";
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

/** A padded frame's content without its pad length byte and padding. */
export function unpad(payload: Buffer): Buffer {
  if (payload.length === 0)
    throw new H2Error(H2_FRAME_SIZE_ERROR, "a padded frame has no pad length");
  const pad = payload[0] as number;
  if (pad >= payload.length) throw new H2Error(H2_PROTOCOL_ERROR, "padding longer than the frame");
  return payload.subarray(1, payload.length - pad);
}

/** A SETTINGS frame of `entries` ([identifier, value]). */
export function settingsFrame(entries: readonly [number, number][]): Buffer {
  const payload = Buffer.alloc(6 * entries.length);
  entries.forEach(([key, value], i) => {
    payload.writeUInt16BE(key, 6 * i);
    payload.writeUInt32BE(value, 6 * i + 2);
  });
  return frame(FRAME_SETTINGS, 0, 0, payload);
}

/** A header block's frames: HEADERS, then CONTINUATIONs when it is larger than `maxFrame`. */
export function headerFrames(
  id: number,
  block: Buffer,
  endStream: boolean,
  maxFrame: number,
): Buffer[] {
  const end = endStream ? FLAG_END_STREAM : 0;
  if (block.length <= maxFrame) return [frame(FRAME_HEADERS, end | FLAG_END_HEADERS, id, block)];
  const out = [frame(FRAME_HEADERS, end, id, block.subarray(0, maxFrame))];
  for (let at = maxFrame; at < block.length; at += maxFrame) {
    const next = Math.min(block.length, at + maxFrame);
    const flags = next === block.length ? FLAG_END_HEADERS : 0;
    out.push(frame(FRAME_CONTINUATION, flags, id, block.subarray(at, next)));
  }
  return out;
}

/** The bytes of a frame that has not all arrived: kept as they come and joined once the frame is
 * whole, so that a frame in many small chunks costs time in proportion to its size (joining at
 * each chunk cost the frame's size per chunk: 0.1 s of CPU for 16 KiB sent a byte at a time). */
export class FrameAssembler {
  private chunks: Buffer[] = [];
  /** Bytes held. */
  private bytes = 0;

  get held(): number {
    return this.bytes;
  }

  /** Adds a chunk to what is held; returns them joined once they hold a whole frame (or a frame
   * header naming more than MAX_FRAME, for the reader to refuse), else undefined. */
  add(chunk: Buffer): Buffer | undefined {
    if (this.bytes === 0) return chunk;
    this.chunks.push(chunk);
    this.bytes += chunk.length;
    if (this.bytes < 9) return undefined;
    if ((this.chunks[0] as Buffer).length < 9) this.chunks = [Buffer.concat(this.chunks)];
    const length = (this.chunks[0] as Buffer).readUIntBE(0, 3);
    if (length <= MAX_FRAME && this.bytes < 9 + length) return undefined;
    const whole = Buffer.concat(this.chunks);
    this.clear();
    return whole;
  }

  /** Holds `rest`, the start of a frame, for the chunks to come. */
  keep(rest: Buffer): void {
    this.chunks = [Buffer.from(rest)];
    this.bytes = rest.length;
  }

  clear(): void {
    this.chunks = [];
    this.bytes = 0;
  }
}
