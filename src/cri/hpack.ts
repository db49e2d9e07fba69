// HPACK (RFC 7541), as much as a client of one gRPC server needs: a decoder of header blocks
// (static and dynamic table, every representation, Huffman-coded strings) and an encoder of
// request headers that never adds to the server's dynamic table (literals without indexing,
// no Huffman coding), so that no state has to be kept for what we send.

/** The static table (RFC 7541 Appendix A), index 1 first. */
const STATIC: readonly (readonly [string, string])[] = [
  [":authority", ""],
  [":method", "GET"],
  [":method", "POST"],
  [":path", "/"],
  [":path", "/index.html"],
  [":scheme", "http"],
  [":scheme", "https"],
  [":status", "200"],
  [":status", "204"],
  [":status", "206"],
  [":status", "304"],
  [":status", "400"],
  [":status", "404"],
  [":status", "500"],
  ["accept-charset", ""],
  ["accept-encoding", "gzip, deflate"],
  ["accept-language", ""],
  ["accept-ranges", ""],
  ["accept", ""],
  ["access-control-allow-origin", ""],
  ["age", ""],
  ["allow", ""],
  ["authorization", ""],
  ["cache-control", ""],
  ["content-disposition", ""],
  ["content-encoding", ""],
  ["content-language", ""],
  ["content-length", ""],
  ["content-location", ""],
  ["content-range", ""],
  ["content-type", ""],
  ["cookie", ""],
  ["date", ""],
  ["etag", ""],
  ["expect", ""],
  ["expires", ""],
  ["from", ""],
  ["host", ""],
  ["if-match", ""],
  ["if-modified-since", ""],
  ["if-none-match", ""],
  ["if-range", ""],
  ["if-unmodified-since", ""],
  ["last-modified", ""],
  ["link", ""],
  ["location", ""],
  ["max-forwards", ""],
  ["proxy-authenticate", ""],
  ["proxy-authorization", ""],
  ["range", ""],
  ["referer", ""],
  ["refresh", ""],
  ["retry-after", ""],
  ["server", ""],
  ["set-cookie", ""],
  ["strict-transport-security", ""],
  ["transfer-encoding", ""],
  ["user-agent", ""],
  ["vary", ""],
  ["via", ""],
  ["www-authenticate", ""],
];

/** Bit lengths of the Huffman code of symbols 0..256 (RFC 7541 Appendix B; 256 is EOS). The code
 * is canonical: the codes of one length are consecutive in symbol order, each length's first
 * code following on from the previous length's last, so the lengths define it. */
const HUFFMAN_LENGTHS = [
  13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28,
  28, 28, 28, 28, 28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5, 5,
  6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
  7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, 6,
  7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23,
  23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22, 21, 20, 22,
  22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22,
  23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19, 21, 26, 27,
  27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25,
  24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, 30,
];

const EOS = 256;

/** The canonical code, for decoding: per length, its first code, how many codes it has, and
 * where its symbols start in `symbols` (sorted by length, then symbol). */
const huffman = (() => {
  const maxLen = 30;
  const count = new Array<number>(maxLen + 1).fill(0);
  for (const len of HUFFMAN_LENGTHS) count[len] = (count[len] as number) + 1;
  const symbols = [...HUFFMAN_LENGTHS.keys()].sort(
    (a, b) => (HUFFMAN_LENGTHS[a] as number) - (HUFFMAN_LENGTHS[b] as number) || a - b,
  );
  const first = new Array<number>(maxLen + 1).fill(0);
  const offset = new Array<number>(maxLen + 1).fill(0);
  let code = 0;
  let at = 0;
  for (let len = 1; len <= maxLen; len++) {
    first[len] = code;
    offset[len] = at;
    code = (code + (count[len] as number)) * 2;
    at += count[len] as number;
  }
  return { count, first, offset, symbols };
})();

/** Thrown for a header block the decoder cannot read (a compression error). */
export class HpackError extends Error {
  override readonly name = "HpackError";
}

/** Decodes the Huffman-coded bytes buf[start, end). */
export function huffmanDecode(buf: Uint8Array, start: number, end: number): Buffer {
  const { count, first, offset, symbols } = huffman;
  const out: number[] = [];
  let code = 0;
  let len = 0;
  for (let i = start; i < end; i++) {
    const byte = buf[i] as number;
    for (let bit = 7; bit >= 0; bit--) {
      code = code * 2 + ((byte >> bit) & 1);
      len++;
      const index = code - (first[len] as number);
      if (index >= 0 && index < (count[len] as number)) {
        const sym = symbols[(offset[len] as number) + index] as number;
        if (sym === EOS) throw new HpackError("a Huffman-coded string holds EOS");
        out.push(sym);
        code = 0;
        len = 0;
      } else if (len === 30) {
        throw new HpackError("a Huffman code is longer than 30 bits");
      }
    }
  }
  // What is left must be padding: fewer than 8 bits, all ones (a prefix of EOS).
  if (len > 7 || code !== 2 ** len - 1) throw new HpackError("bad padding of a Huffman string");
  return Buffer.from(out);
}

/** A header block whose fields add up to more than the decoder was allowed to return. */
export class HeaderListTooLarge extends Error {
  override readonly name = "HeaderListTooLarge";
  constructor(readonly limit: number) {
    super(`a header list larger than the limit of ${limit} bytes`);
  }
}

/** The HPACK decoding context of one connection: its dynamic table. */
export class HpackDecoder {
  /** Newest first. */
  private readonly table: [string, string, number][] = [];
  private size = 0;
  /** The table's current size limit, which the encoder may lower and raise up to `limit`. */
  private capacity: number;

  /** `limit`: the SETTINGS_HEADER_TABLE_SIZE this side announced (4096 by default). */
  constructor(private readonly limit = 4096) {
    this.capacity = limit;
  }

  /** Decodes one complete header block into [name, value] pairs, in order. `maxListBytes`: the
   * most its fields may add up to, counted as SETTINGS_MAX_HEADER_LIST_SIZE counts them (name
   * and value bytes plus 32 each); past it a HeaderListTooLarge is thrown, so that a small block
   * naming a large table entry many times cannot grow the list. */
  decode(block: Uint8Array, maxListBytes = Number.POSITIVE_INFINITY): [string, string][] {
    const out: [string, string][] = [];
    const r = { buf: block, pos: 0 };
    let listBytes = 0;
    while (r.pos < block.length) {
      const b = block[r.pos] as number;
      let field: [string, string];
      if (b & 0x80) {
        const [name, value] = this.entry(readInt(r, 7));
        field = [name, value];
      } else if (b & 0x40) {
        field = this.literal(r, 6);
        this.add(field[0], field[1]);
      } else if (b & 0x20) {
        const size = readInt(r, 5);
        if (size > this.limit) throw new HpackError("a table size update above the limit");
        this.capacity = size;
        this.evict();
        continue;
      } else {
        field = this.literal(r, 4);
      }
      listBytes += Buffer.byteLength(field[0]) + Buffer.byteLength(field[1]) + 32;
      if (listBytes > maxListBytes) throw new HeaderListTooLarge(maxListBytes);
      out.push(field);
    }
    return out;
  }

  private entry(index: number): readonly [string, string] {
    if (index === 0) throw new HpackError("index 0");
    if (index <= STATIC.length) return STATIC[index - 1] as readonly [string, string];
    const dyn = this.table[index - STATIC.length - 1];
    if (dyn === undefined) throw new HpackError(`index ${index} is not in the table`);
    return [dyn[0], dyn[1]];
  }

  private literal(r: Reader, prefix: number): [string, string] {
    const index = readInt(r, prefix);
    const name = index === 0 ? readString(r) : this.entry(index)[0];
    return [name, readString(r)];
  }

  private add(name: string, value: string): void {
    const size = Buffer.byteLength(name) + Buffer.byteLength(value) + 32;
    this.table.unshift([name, value, size]);
    this.size += size;
    this.evict();
  }

  /** Evicts the oldest entries until the table fits in its capacity. */
  private evict(): void {
    while (this.size > this.capacity) {
      const last = this.table.pop();
      if (last === undefined) break;
      this.size -= last[2];
    }
  }
}

interface Reader {
  buf: Uint8Array;
  pos: number;
}

/** An integer with an N-bit prefix (RFC 7541 5.1). */
function readInt(r: Reader, prefix: number): number {
  const max = (1 << prefix) - 1;
  if (r.pos >= r.buf.length) throw new HpackError("a header block ends in an integer");
  let value = (r.buf[r.pos++] as number) & max;
  if (value < max) return value;
  let scale = 1;
  for (;;) {
    if (r.pos >= r.buf.length) throw new HpackError("a header block ends in an integer");
    const b = r.buf[r.pos++] as number;
    value += (b & 0x7f) * scale;
    if (b < 0x80) return value;
    scale *= 128;
    if (scale > 2 ** 28) throw new HpackError("an integer is too large");
  }
}

function readString(r: Reader): string {
  if (r.pos >= r.buf.length) throw new HpackError("a header block ends in a string");
  const huffmanCoded = ((r.buf[r.pos] as number) & 0x80) !== 0;
  const length = readInt(r, 7);
  const end = r.pos + length;
  if (end > r.buf.length) throw new HpackError("a string runs past the header block");
  const s = huffmanCoded
    ? huffmanDecode(r.buf, r.pos, end).toString("utf8")
    : Buffer.from(r.buf.buffer, r.buf.byteOffset + r.pos, length).toString("utf8");
  r.pos = end;
  return s;
}

/** Appends an integer with an N-bit prefix whose first byte starts with `flags`. */
function writeInt(out: number[], flags: number, prefix: number, value: number): void {
  const max = (1 << prefix) - 1;
  if (value < max) {
    out.push(flags | value);
    return;
  }
  out.push(flags | max);
  value -= max;
  while (value >= 0x80) {
    out.push((value % 0x80) | 0x80);
    value = Math.floor(value / 0x80);
  }
  out.push(value);
}

function writeString(out: number[], s: string): void {
  const bytes = Buffer.from(s, "utf8");
  writeInt(out, 0, 7, bytes.length);
  for (const b of bytes) out.push(b);
}

/** Static-table indexes of names, and of whole fields (by name, then value). Two maps, not one
 * keyed by joined text: a name that holds the joining character must not match a field. */
const STATIC_NAME_INDEX = new Map<string, number>();
const STATIC_FIELD_INDEX = new Map<string, Map<string, number>>();
STATIC.forEach(([name, value], i) => {
  if (!STATIC_NAME_INDEX.has(name)) STATIC_NAME_INDEX.set(name, i + 1);
  const values = STATIC_FIELD_INDEX.get(name) ?? new Map<string, number>();
  values.set(value, i + 1);
  STATIC_FIELD_INDEX.set(name, values);
});

/** Encodes request headers: a field of the static table as its index, anything else as a
 * literal without indexing (with the static table's name index when there is one). */
export function encodeHeaders(fields: readonly (readonly [string, string])[]): Buffer {
  const out: number[] = [];
  for (const [name, value] of fields) {
    const full = STATIC_FIELD_INDEX.get(name)?.get(value);
    if (full !== undefined) {
      writeInt(out, 0x80, 7, full);
      continue;
    }
    const nameIndex = STATIC_NAME_INDEX.get(name);
    if (nameIndex !== undefined) writeInt(out, 0, 4, nameIndex);
    else {
      out.push(0);
      writeString(out, name);
    }
    writeString(out, value);
  }
  return Buffer.from(out);
}
