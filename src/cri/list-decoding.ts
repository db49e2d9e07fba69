// Decoding of the two responses the PLEG asks for every relist: ListPodSandbox and
// ListContainers. Between two relists their items almost never change, yet decoding them afresh
// (labels, annotations, IDs: thousands of strings for 110 pods) is a large part of an idle
// agent's CPU. So each item is compared with the item with the same ID last time, and the object
// decoded then is returned again when they are equal.
//
// Equal means: the same top-level fields in the same order, except that the entries of each map
// field (labels, annotations) may come in any order. containerd (Go) writes map entries in a
// random order on every call, so a byte-for-byte comparison almost never matches; entries are
// matched by a hash of their bytes and then compared byte for byte.
//
// Invariants:
// - The result equals what the plain decoder gives for the same bytes (same fields, defaults,
//   enum names, numbers); anything this reader does not expect (a group wire type, an item that
//   does not start with its ID) goes to the plain decoder.
// - An item is reused regardless of map entry order only when its maps had no repeated key when
//   it was decoded (then the order of entries cannot change the decoded value); otherwise only
//   the same bytes reuse it.
// - Items handed out are deeply frozen, because the same object may be returned to many callers:
//   list results are read-only.
// - Memory is bounded by the items seen recently: an item not seen for `sweepEvery` to
//   2 × `sweepEvery` decodes is forgotten.

import { deepFreeze } from "../util/freeze.ts";

type Decode = (buf: Buffer) => unknown;

interface Entry {
  /** The item's bytes as first decoded. */
  bytes: Buffer;
  /** Its top-level fields in `bytes` (see scanFields). */
  fields: number[];
  value: unknown;
  /** Whether map entries may be matched in any order (no map had a repeated key). */
  orderFree: boolean;
}

/** What one list response decoder is built from. */
export interface ListDecoderSpec {
  /** The response field holding the repeated items (always field number 1 in the CRI). */
  field: string;
  /** Decodes a whole response the plain way. */
  decodeResponse: Decode;
  /** Decodes one encoded item the plain way. */
  decodeItem: Decode;
  /** The item type's map fields: field number → property name in decoded items. */
  mapFields: ReadonlyMap<number, string>;
  /** Decodes after which items not seen since are forgotten. Default 128. */
  sweepEvery?: number;
}

export interface ListDecoder {
  (buf: Buffer): unknown;
  /** Items decoded afresh and items reused, since creation. */
  stats(): { decoded: number; reused: number };
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

/** Entries per field in `fields`: field number, start, end (the whole field, tag included) and,
 * for map fields, a hash of those bytes (else 0). */
const STRIDE = 4;

/** FNV-1a over buf[start, end). */
function hashBytes(buf: Buffer, start: number, end: number): number {
  let h = 0x811c9dc5;
  for (let i = start; i < end; i++) h = Math.imul(h ^ (buf[i] as number), 0x01000193);
  return h >>> 0;
}

/** Splits an item into its top-level fields, into `out` (cleared first); false when it holds a
 * wire type this reader does not expect or runs past `end`. */
function scanFields(
  buf: Buffer,
  start: number,
  end: number,
  maps: ReadonlyMap<number, string>,
  out: number[],
): boolean {
  out.length = 0;
  let pos = start;
  while (pos < end) {
    const tag = varint(buf, pos, end);
    if (tag === undefined) return false;
    const field = Math.floor(tag[0] / 8);
    let next = tag[1];
    switch (tag[0] & 7) {
      case 0: {
        // a value (int64 timestamps take 9 bytes): skipped, not read
        const stop = Math.min(end, next + 10);
        while (next < stop && (buf[next] as number) >= 0x80) next++;
        if (next === stop) return false;
        next++;
        break;
      }
      case 1:
        next += 8;
        break;
      case 2: {
        const len = varint(buf, next, end);
        if (len === undefined) return false;
        next = len[1] + len[0];
        break;
      }
      case 5:
        next += 4;
        break;
      default:
        return false;
    }
    if (next > end) return false;
    out.push(field, pos, next, maps.has(field) ? hashBytes(buf, pos, next) : 0);
    pos = next;
  }
  return true;
}

/** Whether the fields of buf[start, end) (scanned into `fields`) decode to the same value as the
 * entry: the same non-map fields in the same order and the same map entries in any order. */
function sameItem(
  entry: Entry,
  buf: Buffer,
  start: number,
  end: number,
  fields: number[],
  maps: ReadonlyMap<number, string>,
  used: Uint8Array,
): boolean {
  const old = entry.bytes;
  if (old.length !== end - start) return false;
  if (buf.compare(old, 0, old.length, start, end) === 0) return true;
  if (!entry.orderFree || entry.fields.length !== fields.length) return false;
  const n = fields.length;
  used.fill(0, 0, n / STRIDE);
  let j = 0; // next non-map field of the entry
  for (let i = 0; i < n; i += STRIDE) {
    const num = fields[i] as number;
    const s = fields[i + 1] as number;
    const e = fields[i + 2] as number;
    if (maps.has(num)) {
      const hash = fields[i + 3] as number;
      let found = false;
      for (let k = 0; k < n; k += STRIDE) {
        if (used[k / STRIDE] || entry.fields[k] !== num || entry.fields[k + 3] !== hash) continue;
        const os = entry.fields[k + 1] as number;
        const oe = entry.fields[k + 2] as number;
        if (oe - os !== e - s || buf.compare(old, os, oe, s, e) !== 0) continue;
        used[k / STRIDE] = 1;
        found = true;
        break;
      }
      if (!found) return false;
    } else {
      while (j < n && maps.has(entry.fields[j] as number)) j += STRIDE;
      if (j >= n || entry.fields[j] !== num) return false;
      const os = entry.fields[j + 1] as number;
      const oe = entry.fields[j + 2] as number;
      if (oe - os !== e - s || buf.compare(old, os, oe, s, e) !== 0) return false;
      j += STRIDE;
    }
  }
  return true;
}

/** Whether every map of the decoded item has as many keys as the item has entries for it, i.e.
 * no key was repeated. */
function noRepeatedKeys(
  value: unknown,
  fields: number[],
  maps: ReadonlyMap<number, string>,
): boolean {
  for (const [num, name] of maps) {
    let entries = 0;
    for (let i = 0; i < fields.length; i += STRIDE) if (fields[i] === num) entries++;
    const map = (value as Record<string, unknown>)[name];
    const keys = map !== null && typeof map === "object" ? Object.keys(map).length : 0;
    if (keys !== entries) return false;
  }
  return true;
}

export function createListDecoder(spec: ListDecoderSpec): ListDecoder {
  const sweepEvery = spec.sweepEvery ?? 128;
  let young = new Map<string, Entry>();
  let old = new Map<string, Entry>();
  let calls = 0;
  const counts = { decoded: 0, reused: 0 };

  const maps = spec.mapFields;
  const fields: number[] = [];
  let used = new Uint8Array(64);

  function item(buf: Buffer, start: number, end: number): unknown {
    const id = itemId(buf, start, end);
    if (id === undefined || !scanFields(buf, start, end, maps, fields)) {
      counts.decoded++;
      return deepFreeze(spec.decodeItem(buf.subarray(start, end)));
    }
    if (used.length < fields.length / STRIDE) used = new Uint8Array(fields.length);
    let entry = young.get(id);
    if (entry === undefined) {
      entry = old.get(id);
      if (entry !== undefined) young.set(id, entry);
    }
    if (entry !== undefined && sameItem(entry, buf, start, end, fields, maps, used)) {
      counts.reused++;
      return entry.value;
    }
    counts.decoded++;
    const bytes = Buffer.from(buf.subarray(start, end)); // a copy: the response buffer is not kept
    const value = deepFreeze(spec.decodeItem(bytes));
    const own = fields.map((v, i) => (i % STRIDE === 1 || i % STRIDE === 2 ? v - start : v));
    const orderFree = noRepeatedKeys(value, own, maps);
    young.set(id, { bytes, fields: own, value, orderFree });
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
