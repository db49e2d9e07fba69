// Decoding of the two responses the PLEG asks for every relist: ListPodSandbox and
// ListContainers. Between two relists their items almost never change, yet decoding them afresh
// (labels, annotations, IDs: thousands of strings for 110 pods) was most of an idle agent's CPU.
// So each item's encoded bytes are compared with the bytes of the item with the same ID last
// time, and the object decoded then is returned again when they are equal.
//
// Invariants:
// - The result equals what the plain decoder gives for the same bytes (same fields, defaults,
//   enum names, numbers); anything this reader does not expect (another field, a wire type, an
//   item that does not start with its ID) goes to the plain decoder.
// - Items handed out are deeply frozen, because the same object may be returned to many callers:
//   list results are read-only.
// - Memory is bounded by the items seen recently: an item not seen for `sweepEvery` to
//   2 × `sweepEvery` decodes is forgotten.

type Decode = (buf: Buffer) => unknown;

interface Entry {
  bytes: Buffer;
  value: unknown;
}

/** What one list response decoder is built from. */
export interface ListDecoderSpec {
  /** The response field holding the repeated items (always field number 1 in the CRI). */
  field: string;
  /** Decodes a whole response the plain way. */
  decodeResponse: Decode;
  /** Decodes one encoded item the plain way. */
  decodeItem: Decode;
  /** Decodes after which items not seen since are forgotten. Default 128. */
  sweepEvery?: number;
}

export interface ListDecoder {
  (buf: Buffer): unknown;
  /** Items decoded afresh and items reused, since creation. */
  stats(): { decoded: number; reused: number };
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/** Reads a base-128 varint at `pos`; returns [value, next position], or undefined when the
 * varint runs past `end` or is longer than 7 bytes (no length here comes near 2^49). */
function varint(buf: Buffer, pos: number, end: number): [number, number] | undefined {
  let value = 0;
  let scale = 1;
  for (let i = 0; i < 7 && pos < end; i++) {
    const b = buf[pos++] as number;
    value += (b & 0x7f) * scale;
    if (b < 0x80) return [value, pos];
    scale *= 128;
  }
  return undefined;
}

/** [start, end) of each item of field 1 (wire type 2), or undefined if the response holds
 * anything else. */
function itemBounds(buf: Buffer): number[] | undefined {
  const bounds: number[] = [];
  let pos = 0;
  while (pos < buf.length) {
    if (buf[pos] !== 0x0a) return undefined; // field 1, length-delimited
    const len = varint(buf, pos + 1, buf.length);
    if (len === undefined) return undefined;
    const start = len[1];
    const end = start + len[0];
    if (end > buf.length) return undefined;
    bounds.push(start, end);
    pos = end;
  }
  return bounds;
}

/** The item's ID (its field 1, a string) as a map key, or undefined when it does not start
 * with it. */
function itemId(buf: Buffer, start: number, end: number): string | undefined {
  if (buf[start] !== 0x0a) return undefined;
  const len = varint(buf, start + 1, end);
  if (len === undefined || len[1] + len[0] > end) return undefined;
  return buf.toString("latin1", len[1], len[1] + len[0]);
}

export function createListDecoder(spec: ListDecoderSpec): ListDecoder {
  const sweepEvery = spec.sweepEvery ?? 128;
  let young = new Map<string, Entry>();
  let old = new Map<string, Entry>();
  let calls = 0;
  const counts = { decoded: 0, reused: 0 };

  function item(buf: Buffer, start: number, end: number): unknown {
    const id = itemId(buf, start, end);
    if (id === undefined) {
      counts.decoded++;
      return deepFreeze(spec.decodeItem(buf.subarray(start, end)));
    }
    let entry = young.get(id);
    if (entry === undefined) {
      entry = old.get(id);
      if (entry !== undefined) young.set(id, entry);
    }
    if (
      entry !== undefined &&
      entry.bytes.length === end - start &&
      buf.compare(entry.bytes, 0, entry.bytes.length, start, end) === 0
    ) {
      counts.reused++;
      return entry.value;
    }
    counts.decoded++;
    const bytes = Buffer.from(buf.subarray(start, end)); // a copy: the response buffer is not kept
    const value = deepFreeze(spec.decodeItem(bytes));
    young.set(id, { bytes, value });
    return value;
  }

  const decode = (buf: Buffer): unknown => {
    if (++calls % sweepEvery === 0) {
      old = young;
      young = new Map();
    }
    const bounds = itemBounds(buf);
    if (bounds === undefined) return spec.decodeResponse(buf);
    const items: unknown[] = [];
    for (let i = 0; i < bounds.length; i += 2) {
      items.push(item(buf, bounds[i] as number, bounds[i + 1] as number));
    }
    return { [spec.field]: items };
  };
  return Object.assign(decode, { stats: () => ({ ...counts }) });
}
