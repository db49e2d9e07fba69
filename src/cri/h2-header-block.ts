// Header blocks as they arrive (RFC 9113 4.3): a HEADERS frame and the CONTINUATION frames that
// follow it, decoded with the connection's one HPACK context once the block is whole. A block is
// bounded in its encoded bytes, in its decoded fields and in its frames, so that a peer that never
// ends one (or ends it in empty CONTINUATIONs) is stopped before it costs more.

import {
  FLAG_END_HEADERS,
  FLAG_END_STREAM,
  FLAG_PADDED,
  FLAG_PRIORITY,
  H2_ENHANCE_YOUR_CALM,
  H2_FRAME_SIZE_ERROR,
  H2_PROTOCOL_ERROR,
  H2Error,
  unpad,
} from "./h2-frame.ts";
import { HpackDecoder } from "./hpack.ts";

/** A whole header block, decoded. */
export interface HeaderBlock {
  id: number;
  fields: [string, string][];
  /** The HEADERS frame ended its stream. */
  endStream: boolean;
}

export class HeaderBlockReader {
  private readonly decoder = new HpackDecoder();
  /** A block in CONTINUATION frames: its stream, fragments, their bytes and END_STREAM. */
  private partial:
    | { id: number; fragments: Buffer[]; bytes: number; endStream: boolean }
    | undefined;

  /** `maxBytes`: the largest block, encoded or decoded (SETTINGS_MAX_HEADER_LIST_SIZE). */
  constructor(private readonly maxBytes: number) {}

  /** A block is open: only its CONTINUATION frames may come next. */
  get open(): boolean {
    return this.partial !== undefined;
  }

  /** A HEADERS frame: its block when it is whole (END_HEADERS), else undefined. */
  headers(flags: number, id: number, payload: Buffer): HeaderBlock | undefined {
    let block = flags & FLAG_PADDED ? unpad(payload) : payload;
    if (flags & FLAG_PRIORITY) {
      if (block.length < 5)
        throw new H2Error(H2_FRAME_SIZE_ERROR, "HEADERS too short for PRIORITY");
      block = block.subarray(5);
    }
    const endStream = (flags & FLAG_END_STREAM) !== 0;
    this.check(block.length, 1);
    if (flags & FLAG_END_HEADERS) return this.decode(id, block, endStream);
    this.partial = { id, fragments: [Buffer.from(block)], bytes: block.length, endStream };
    return undefined;
  }

  /** A CONTINUATION frame: the block when this one ends it, else undefined. */
  continuation(flags: number, id: number, payload: Buffer): HeaderBlock | undefined {
    const p = this.partial;
    if (p === undefined || p.id !== id) {
      throw new H2Error(H2_PROTOCOL_ERROR, "an unexpected CONTINUATION");
    }
    p.bytes += payload.length;
    this.check(p.bytes, p.fragments.length + 1);
    p.fragments.push(Buffer.from(payload));
    if (!(flags & FLAG_END_HEADERS)) return undefined;
    this.partial = undefined;
    return this.decode(id, Buffer.concat(p.fragments), p.endStream);
  }

  /** Drops an open block (the connection is gone). */
  clear(): void {
    this.partial = undefined;
  }

  private decode(id: number, block: Buffer, endStream: boolean): HeaderBlock {
    return { id, fields: this.decoder.decode(block, this.maxBytes), endStream };
  }

  /** A block of `bytes` so far in `frames` frames: past the limit, or cut into more frames than
   * a block of the limit needs (empty CONTINUATIONs carry nothing), it ends the connection. */
  private check(bytes: number, frames: number): void {
    if (bytes > this.maxBytes) {
      const why = `a header block larger than the limit of ${this.maxBytes} bytes`;
      throw new H2Error(H2_ENHANCE_YOUR_CALM, why);
    }
    if (frames > Math.ceil(this.maxBytes / 1024) + 16) {
      throw new H2Error(H2_ENHANCE_YOUR_CALM, `a header block in ${frames} frames`);
    }
  }
}
