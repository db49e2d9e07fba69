// SPDY/3.1 framing, as much as kubectl's port-forward needs (it tunnels SPDY through a WebSocket,
// subprotocol "SPDY/3.1+portforward.k8s.io") and the agent's exec on the runtime's streaming
// server (whose SPDY can end a command's stdin): frames read from a byte stream, and the frames
// the hub and the agent send. Header blocks are zlib streams with SPDY's preset dictionary that continue
// from frame to frame; each ends on a sync flush, so each one is inflated on its own with the
// last 32 KiB of what came before as its window. The hub's own header blocks are stored (not
// compressed) deflate blocks, which every zlib reader takes.
import { constants, inflateRawSync } from "node:zlib";

/** SPDY/3's header dictionary: length-prefixed names and values, then a run of common text. */
const DICTIONARY_WORDS = [
  "options",
  "head",
  "post",
  "put",
  "delete",
  "trace",
  "accept",
  "accept-charset",
  "accept-encoding",
  "accept-language",
  "accept-ranges",
  "age",
  "allow",
  "authorization",
  "cache-control",
  "connection",
  "content-base",
  "content-encoding",
  "content-language",
  "content-length",
  "content-location",
  "content-md5",
  "content-range",
  "content-type",
  "date",
  "etag",
  "expect",
  "expires",
  "from",
  "host",
  "if-match",
  "if-modified-since",
  "if-none-match",
  "if-range",
  "if-unmodified-since",
  "last-modified",
  "location",
  "max-forwards",
  "pragma",
  "proxy-authenticate",
  "proxy-authorization",
  "range",
  "referer",
  "retry-after",
  "server",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "user-agent",
  "vary",
  "via",
  "warning",
  "www-authenticate",
  "method",
  "get",
  "status",
  "200 OK",
  "version",
  "HTTP/1.1",
  "url",
  "public",
  "set-cookie",
  "keep-alive",
  "origin",
];
const DICTIONARY_TAIL =
  "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505" +
  "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized" +
  "403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service Unavailable" +
  "Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT" +
  "chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain," +
  "text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.";

export const SPDY_DICTIONARY: Buffer = Buffer.concat([
  ...DICTIONARY_WORDS.flatMap((w) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(w.length);
    return [len, Buffer.from(w, "latin1")];
  }),
  Buffer.from(DICTIONARY_TAIL, "latin1"),
]);

export const SPDY = {
  synStream: 1,
  synReply: 2,
  rstStream: 3,
  settings: 4,
  ping: 6,
  goAway: 7,
  headers: 8,
  windowUpdate: 9,
  flagFin: 1,
  /** RST_STREAM statuses. */
  protocolError: 1,
  cancel: 5,
} as const;

export type SpdyFrame =
  | { control: true; type: number; flags: number; data: Buffer }
  | { control: false; streamId: number; flags: number; data: Buffer };

/** Cuts frames out of the byte stream; throws when the stream is not SPDY/3. Chunks are kept
 * as they come and joined once per frame, so that a frame that arrives in many small chunks
 * costs time in proportion to its size (joining at each chunk cost its size times the chunks). */
export class SpdyReader {
  private chunks: Buffer[] = [];
  private size = 0;

  constructor(private readonly maxFrame = 16 * 1024 * 1024) {}

  push(chunk: Uint8Array): SpdyFrame[] {
    if (chunk.length > 0) {
      this.chunks.push(Buffer.from(chunk));
      this.size += chunk.length;
    }
    const out: SpdyFrame[] = [];
    while (this.size >= 8) {
      const head = this.peek(8);
      const length = head.readUInt32BE(4) & 0xffffff;
      if (length > this.maxFrame) throw new Error(`a SPDY frame of ${length} bytes is too large`);
      if (this.size < 8 + length) break;
      const flags = head[4] as number;
      const data = this.take(8 + length).subarray(8);
      if ((head[0] as number) & 0x80) {
        const version = head.readUInt16BE(0) & 0x7fff;
        if (version !== 3) throw new Error(`SPDY version ${version} is not spoken (only 3)`);
        out.push({ control: true, type: head.readUInt16BE(2), flags, data });
      } else {
        out.push({ control: false, streamId: head.readUInt32BE(0) & 0x7fffffff, flags, data });
      }
    }
    return out;
  }

  /** The first `n` bytes held (n <= size), joined into the first chunk. */
  private peek(n: number): Buffer {
    let first = this.chunks[0] as Buffer;
    if (first.length < n) {
      let joined = 1;
      for (let have = first.length; have < n; joined++)
        have += (this.chunks[joined] as Buffer).length;
      first = Buffer.concat(this.chunks.slice(0, joined));
      this.chunks.splice(0, joined, first);
    }
    return first;
  }

  /** Removes and returns the first `n` bytes held (n <= size). */
  private take(n: number): Buffer {
    const first = this.peek(n);
    this.size -= n;
    if (first.length === n) this.chunks.shift();
    else this.chunks[0] = first.subarray(n);
    return first.subarray(0, n);
  }
}

/** The most one inflated header block may hold: a port-forward's or an exec's headers are a few
 * hundred bytes, and a block of a few KiB can inflate to gigabytes. */
const MAX_HEADER_BLOCK_BYTES = 64 * 1024;

/** The peer's header blocks, in order; each call decodes the next one. */
export class HeaderInflater {
  private window: Buffer = SPDY_DICTIONARY;
  private first = true;

  /** `maxBytes`: the most one block may inflate to; past it decode() throws. */
  constructor(private readonly maxBytes = MAX_HEADER_BLOCK_BYTES) {}

  /** The name/value pairs of one header block (names lowercase). */
  decode(block: Uint8Array): Map<string, string> {
    let raw = Buffer.from(block);
    if (this.first) {
      if (raw.length < 6 || ((raw[0] as number) & 0x0f) !== 8 || !((raw[1] as number) & 0x20))
        throw new Error(
          "a SPDY header block does not start with a zlib header naming the dictionary",
        );
      raw = raw.subarray(6);
      this.first = false;
    }
    let out: Buffer;
    try {
      out = inflateRawSync(raw, {
        dictionary: this.window,
        finishFlush: constants.Z_SYNC_FLUSH,
        maxOutputLength: this.maxBytes,
      });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ERR_BUFFER_TOO_LARGE") {
        throw new Error(`a SPDY header block inflates past the limit of ${this.maxBytes} bytes`);
      }
      throw new Error(`a SPDY header block is not valid zlib: ${(err as Error).message}`);
    }
    this.window = Buffer.concat([this.window, out]).subarray(-32768);
    return parseHeaderBlock(out);
  }
}

function parseHeaderBlock(b: Buffer): Map<string, string> {
  const headers = new Map<string, string>();
  let at = 0;
  const u32 = () => {
    if (at + 4 > b.length) throw new Error("a SPDY header block is cut short");
    const v = b.readUInt32BE(at);
    at += 4;
    return v;
  };
  const str = () => {
    const n = u32();
    if (at + n > b.length) throw new Error("a SPDY header block is cut short");
    const s = b.subarray(at, at + n).toString("latin1");
    at += n;
    return s;
  };
  for (let count = u32(); count > 0; count--) headers.set(str().toLowerCase(), str());
  return headers;
}

/** The hub's header blocks: a zlib stream of stored blocks. */
export class HeaderDeflater {
  private first = true;

  encode(headers: Record<string, string>): Buffer {
    const parts: Buffer[] = [];
    const entries = Object.entries(headers);
    const u32 = (n: number) => {
      const b = Buffer.alloc(4);
      b.writeUInt32BE(n);
      return b;
    };
    parts.push(u32(entries.length));
    for (const [k, v] of entries) {
      parts.push(u32(Buffer.byteLength(k, "latin1")), Buffer.from(k, "latin1"));
      parts.push(u32(Buffer.byteLength(v, "latin1")), Buffer.from(v, "latin1"));
    }
    const raw = Buffer.concat(parts);
    const stored = Buffer.alloc(5);
    stored[0] = 0; // not final, stored
    stored.writeUInt16LE(raw.length, 1);
    stored.writeUInt16LE(~raw.length & 0xffff, 3);
    const head = this.first ? zlibHeader() : Buffer.alloc(0);
    this.first = false;
    // An empty stored block ends each header block, as a sync flush does: a reader returns the
    // headers on it instead of reading on into the next frame.
    return Buffer.concat([head, stored, raw, SYNC_FLUSH]);
  }
}

const SYNC_FLUSH = Buffer.from([0, 0, 0, 0xff, 0xff]);

function adler32(b: Buffer): number {
  let a = 1;
  let s = 0;
  for (const x of b) {
    a = (a + x) % 65521;
    s = (s + a) % 65521;
  }
  return ((s << 16) | a) >>> 0;
}

/** The zlib header of a stream using SPDY's dictionary. */
function zlibHeader(): Buffer {
  const b = Buffer.alloc(6);
  b[0] = 0x78;
  b[1] = 0xbb; // FDICT, and (0x78 * 256 + 0xbb) % 31 === 0
  b.writeUInt32BE(adler32(SPDY_DICTIONARY), 2);
  return b;
}

function control(type: number, flags: number, payload: Buffer): Buffer {
  const b = Buffer.alloc(8 + payload.length);
  b.writeUInt16BE(0x8003, 0);
  b.writeUInt16BE(type, 2);
  b.writeUInt32BE(payload.length, 4);
  b[4] = flags;
  payload.copy(b, 8);
  return b;
}

export const spdyFrames = {
  synStream(
    deflater: HeaderDeflater,
    streamId: number,
    headers: Record<string, string>,
    fin = false,
  ): Buffer {
    const ids = Buffer.alloc(10);
    ids.writeUInt32BE(streamId, 0);
    ids.writeUInt32BE(0, 4); // no associated stream; priority and slot 0
    return control(
      SPDY.synStream,
      fin ? SPDY.flagFin : 0,
      Buffer.concat([ids, deflater.encode(headers)]),
    );
  },
  synReply(
    deflater: HeaderDeflater,
    streamId: number,
    headers: Record<string, string>,
    fin = false,
  ): Buffer {
    const id = Buffer.alloc(4);
    id.writeUInt32BE(streamId);
    return control(
      SPDY.synReply,
      fin ? SPDY.flagFin : 0,
      Buffer.concat([id, deflater.encode(headers)]),
    );
  },
  data(streamId: number, payload: Uint8Array, fin = false): Buffer {
    const b = Buffer.alloc(8 + payload.length);
    b.writeUInt32BE(streamId & 0x7fffffff, 0);
    b.writeUInt32BE(payload.length, 4);
    b[4] = fin ? SPDY.flagFin : 0;
    b.set(payload, 8);
    return b;
  },
  rstStream(streamId: number, status: number): Buffer {
    const p = Buffer.alloc(8);
    p.writeUInt32BE(streamId, 0);
    p.writeUInt32BE(status, 4);
    return control(SPDY.rstStream, 0, p);
  },
  ping(id: number): Buffer {
    const p = Buffer.alloc(4);
    p.writeUInt32BE(id);
    return control(SPDY.ping, 0, p);
  },
  goAway(lastGood: number, status = 0): Buffer {
    const p = Buffer.alloc(8);
    p.writeUInt32BE(lastGood, 0);
    p.writeUInt32BE(status, 4);
    return control(SPDY.goAway, 0, p);
  },
};
