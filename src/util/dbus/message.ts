// D-Bus messages: the fixed 16-byte start (byte order, type, flags, version, body length,
// serial), the header fields a(yv), padding to 8, the body. We write little-endian and read
// both. A message longer than the reader's limit is refused from its first 16 bytes, before its
// bytes are gathered.
import { marshal, Writer, writeValue } from "./marshal.ts";
import {
  DBusDecodeError,
  DBusEncodeError,
  type DBusValue,
  isObjectPath,
  parseSignature,
  Variant,
} from "./types.ts";
import { Reader, readValue, unmarshal } from "./unmarshal.ts";

const MessageType = { call: 1, return: 2, error: 3, signal: 4 } as const;
type MessageKind = keyof typeof MessageType;

/** The flag that tells the peer no reply is wanted. */
export const NO_REPLY_EXPECTED = 0x1;

/** The largest message the specification allows (128 MiB); readers default far lower. */
const SPEC_MAX_MESSAGE_BYTES = 128 * 1024 * 1024;
/** The default limit on a message read: systemd's answers to us are a few KiB. */
export const DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024;

export interface Message {
  kind: MessageKind;
  flags: number;
  /** Set by the connection when it sends; 0 until then. */
  serial: number;
  path?: string;
  interface?: string;
  member?: string;
  errorName?: string;
  replySerial?: number;
  destination?: string;
  sender?: string;
  /** The body's signature; "" for no body. */
  signature: string;
  body: DBusValue[];
}

const FIELDS = [
  [1, "path", "o"],
  [2, "interface", "s"],
  [3, "member", "s"],
  [4, "errorName", "s"],
  [5, "replySerial", "u"],
  [6, "destination", "s"],
  [7, "sender", "s"],
] as const;

const KIND_BY_CODE = new Map<number, MessageKind>(
  Object.entries(MessageType).map(([k, v]) => [v, k as MessageKind]),
);

/** The header fields each message type must carry. */
const REQUIRED: Record<MessageKind, (keyof Message)[]> = {
  call: ["path", "member"],
  return: ["replySerial"],
  error: ["errorName", "replySerial"],
  signal: ["path", "interface", "member"],
};

/** The bytes of `m` with `serial`, little-endian unless `little` is false. */
export function encodeMessage(m: Message, serial: number, little = true): Uint8Array {
  const body = marshal(m.signature, m.body, little);
  const fields: DBusValue[] = [];
  for (const [code, key, sig] of FIELDS) {
    const v = m[key];
    if (v !== undefined) fields.push([code, new Variant(sig, v)]);
  }
  if (m.signature !== "") fields.push([8, new Variant("g", m.signature)]);
  for (const key of REQUIRED[m.kind]) {
    if (m[key] === undefined) throw new DBusEncodeError(`a ${m.kind} message needs its ${key}`);
  }
  const w = new Writer(little);
  w.bytes(new Uint8Array([little ? 0x6c : 0x42, MessageType[m.kind], m.flags, 1]));
  w.fixed("u", body.length);
  w.fixed("u", serial);
  writeValue(w, parseSignature("a(yv)")[0] ?? { code: "v" }, fields);
  w.pad(8);
  w.bytes(body);
  return w.result().slice();
}

/**
 * The length of the message whose first 16 bytes `start` holds, or throws DBusDecodeError if
 * those bytes cannot start a message or it would be longer than `maxBytes`.
 */
export function messageLength(start: Uint8Array, maxBytes: number): number {
  if (start.length < 16) throw new DBusDecodeError("a message starts with 16 bytes");
  const little = start[0] === 0x6c;
  if (!little && start[0] !== 0x42) {
    throw new DBusDecodeError(`byte order ${start[0]} is neither 'l' nor 'B'`);
  }
  if (start[3] !== 1) throw new DBusDecodeError(`protocol version ${start[3]} is not 1`);
  const v = new DataView(start.buffer, start.byteOffset, 16);
  const bodyLength = v.getUint32(4, little);
  const fieldsLength = v.getUint32(12, little);
  const total = 16 + Math.ceil(fieldsLength / 8) * 8 + bodyLength;
  const limit = Math.min(maxBytes, SPEC_MAX_MESSAGE_BYTES);
  if (total > limit) {
    throw new DBusDecodeError(`message of ${total} bytes is longer than the limit ${limit}`);
  }
  return total;
}

function readFields(r: Reader, m: Message): void {
  const array = readValue(r, parseSignature("a(yv)")[0] ?? { code: "v" }) as [number, Variant][];
  const seen = new Set<number>();
  for (const [code, variant] of array) {
    if (seen.has(code)) throw new DBusDecodeError(`header field ${code} comes twice`);
    seen.add(code);
    const known = FIELDS.find(([c]) => c === code);
    const sig = code === 8 ? "g" : code === 9 ? "u" : known?.[2];
    if (sig === undefined) continue;
    if (variant.signature !== sig) {
      throw new DBusDecodeError(`header field ${code} has type ${variant.signature}, not ${sig}`);
    }
    if (code === 8) m.signature = variant.value as string;
    else if (code === 9) throw new DBusDecodeError("messages with file descriptors are refused");
    else if (known !== undefined)
      (m as unknown as Record<string, unknown>)[known[1]] = variant.value;
  }
}

function checkHeader(m: Message): void {
  for (const key of REQUIRED[m.kind]) {
    if (m[key] === undefined) throw new DBusDecodeError(`${m.kind} message without its ${key}`);
  }
  if (m.path !== undefined && !isObjectPath(m.path)) {
    throw new DBusDecodeError(`path ${JSON.stringify(m.path)} is not an object path`);
  }
  if (m.serial === 0) throw new DBusDecodeError("message with serial 0");
}

/**
 * The message in `bytes` (exactly one whole message), or null for a message of a type this
 * reader does not know (which the specification says to ignore). Throws DBusDecodeError for
 * anything else that is not a valid message or is longer than `maxBytes`.
 */
export function decodeMessage(
  bytes: Uint8Array,
  maxBytes = DEFAULT_MAX_MESSAGE_BYTES,
): Message | null {
  const total = messageLength(bytes, maxBytes);
  if (total !== bytes.length) {
    throw new DBusDecodeError(`message says ${total} bytes but ${bytes.length} were given`);
  }
  const little = bytes[0] === 0x6c;
  const kind = KIND_BY_CODE.get(bytes[1] ?? 0);
  const r = new Reader(bytes, little);
  r.pos = 4;
  const bodyLength = r.fixed("u");
  const serial = r.fixed("u");
  const m: Message = {
    kind: kind ?? "call",
    flags: bytes[2] ?? 0,
    serial,
    signature: "",
    body: [],
  };
  readFields(r, m);
  r.align(8);
  if (r.left !== bodyLength)
    throw new DBusDecodeError(`body of ${r.left} bytes, not ${bodyLength}`);
  if (kind === undefined) return null;
  checkHeader(m);
  m.body = unmarshal(m.signature, bytes.subarray(r.pos), little);
  return m;
}
