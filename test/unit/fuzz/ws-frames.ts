// WebSocket frames as a hostile client sends them (RFC 6455, section 5), for the hub's raw frame
// property: valid frames, frames with one header field broken, and what a server must answer to a
// list of them (the first violation and its close code, or none). Also reads the frames a server
// sends back (unmasked, never fragmented by the hub).
import fc from "fast-check";
import { agentMessage, helloOf } from "./hub-messages.ts";
import { brokenText, nearValidText } from "./json-mutations.ts";

export const OP = { cont: 0, text: 1, binary: 2, close: 8, ping: 9, pong: 10 } as const;

/** The hub's largest WebSocket message: Bun.serve's maxPayloadLength (2 × maxMessageBytes). */
const MAX_PAYLOAD = 2 * 1024 * 1024;

/** One client frame. `declared`: the length field when it is not the payload's (a frame whose
 * data never all comes, or a huge length sent with no data at all). */
export interface FrameSpec {
  fin: boolean;
  rsv: number;
  opcode: number;
  masked: boolean;
  payload: Uint8Array;
  declared?: bigint;
}

const utf8 = (s: string) => new TextEncoder().encode(s);
const closePayload = (code: number, reason: Uint8Array = new Uint8Array()) =>
  new Uint8Array([code >> 8, code & 255, ...reason]);

/** The frame's bytes, masked with `key` when it says so. */
export function encodeFrame(f: FrameSpec, key: Uint8Array): Uint8Array {
  const len = f.declared ?? BigInt(f.payload.length);
  const head = [(f.fin ? 0x80 : 0) | (f.rsv << 4) | f.opcode];
  const m = f.masked ? 0x80 : 0;
  if (len < 126n) head.push(m | Number(len));
  else if (len < 65536n) head.push(m | 126, Number(len >> 8n), Number(len & 255n));
  else {
    head.push(m | 127);
    for (let i = 7; i >= 0; i--) head.push(Number((len >> BigInt(8 * i)) & 255n));
  }
  const body = f.masked ? f.payload.map((b, i) => b ^ (key[i % 4] as number)) : f.payload;
  const out = new Uint8Array(head.length + (f.masked ? 4 : 0) + body.length);
  out.set(head);
  if (f.masked) out.set(key, head.length);
  out.set(body, head.length + (f.masked ? 4 : 0));
  return out;
}

const frame = (opcode: number, payload: Uint8Array, fin = true): FrameSpec => ({
  fin,
  rsv: 0,
  opcode,
  masked: true,
  payload,
});

const agentText = fc.oneof(
  { weight: 3, arbitrary: nearValidText(agentMessage(1)) },
  { weight: 1, arbitrary: brokenText(agentMessage(1)) },
);

/** Frames a server must accept: messages (some in fragments, a ping between them), pings, pongs. */
const validFrames: fc.Arbitrary<FrameSpec[]> = fc.oneof(
  agentText.map((t) => [frame(OP.text, utf8(t))]),
  fc.uint8Array({ maxLength: 300 }).map((b) => [frame(OP.binary, b)]),
  fc
    .tuple(agentText, fc.integer({ min: 1, max: 4 }), fc.uint8Array({ maxLength: 125 }))
    .map(([t, n, ping]) => {
      const bytes = utf8(t);
      const cut = (i: number) => bytes.subarray(Math.floor((i * bytes.length) / n));
      const parts = Array.from({ length: n }, (_, i) =>
        cut(i).subarray(0, cut(i).length - cut(i + 1).length),
      );
      const frags = parts.map((p, i) => frame(i === 0 ? OP.text : OP.cont, p, i === n - 1));
      return [...frags.slice(0, 1), frame(OP.ping, ping), ...frags.slice(1)];
    }),
  fc.uint8Array({ maxLength: 125 }).map((b) => [frame(OP.ping, b)]),
  fc.uint8Array({ maxLength: 125 }).map((b) => [frame(OP.pong, b)]),
);

const badUtf8 = fc.constantFrom(
  [0xff],
  [0xc0, 0x80],
  [0xed, 0xa0, 0x80],
  [0xe2, 0x82],
  [0xf4, 0x90, 0x80, 0x80],
);
const badCloseCodes = [0, 999, 1004, 1005, 1006, 1015, 1016, 2999, 5000, 65535];

/** Frames breaking one rule of RFC 6455 (or the hub's payload limit). */
const brokenFrames: fc.Arbitrary<FrameSpec[]> = fc.oneof(
  fc.integer({ min: 1, max: 7 }).map((rsv) => [{ ...frame(OP.text, utf8("{}")), rsv }]),
  fc.constantFrom(3, 4, 5, 6, 7, 11, 12, 13, 14, 15).map((op) => [frame(op, utf8("x"))]),
  agentText.map((t) => [{ ...frame(OP.text, utf8(t)), masked: false }]),
  fc.constantFrom(OP.ping, OP.pong, OP.close).map((op) => [frame(op, new Uint8Array(), false)]),
  fc
    .tuple(fc.constantFrom(OP.ping, OP.pong, OP.close), fc.integer({ min: 126, max: 400 }))
    .map(([op, n]) => [frame(op, new Uint8Array(n).fill(0x61))]),
  fc
    .constantFrom(BigInt(MAX_PAYLOAD) + 1n, 1n << 32n, 1n << 40n, 1n << 63n, (1n << 64n) - 1n)
    .map((declared) => [{ ...frame(OP.binary, new Uint8Array()), declared }]),
  fc.uint8Array({ maxLength: 20 }).map((b) => [frame(OP.cont, b)]),
  fc
    .tuple(fc.constantFrom(OP.text, OP.binary), fc.constantFrom(OP.text, OP.binary))
    .map(([a, b]) => [frame(a, utf8("{"), false), frame(b, utf8("}"))]),
  fc.tuple(badUtf8, fc.boolean()).map(([bad, split]) => {
    const bytes = new Uint8Array([...utf8('{"type":"'), ...bad, ...utf8('"}')]);
    if (!split) return [frame(OP.text, bytes)];
    return [frame(OP.text, bytes.subarray(0, 10), false), frame(OP.cont, bytes.subarray(10))];
  }),
  fc.constantFrom(...badCloseCodes).map((c) => [frame(OP.close, closePayload(c))]),
  fc.constant<FrameSpec[]>([frame(OP.close, new Uint8Array([3]))]),
  badUtf8.map((bad) => [frame(OP.close, closePayload(1000, new Uint8Array(bad)))]),
  fc.constant<FrameSpec[]>([
    frame(OP.binary, new Uint8Array(1 << 20), false),
    frame(OP.cont, new Uint8Array(1 << 20), false),
    frame(OP.cont, new Uint8Array(1 << 10)),
  ]),
);

/** A frame whose length field promises more than is sent (the client then ends the connection). */
const truncated: fc.Arbitrary<FrameSpec[]> = fc
  .tuple(fc.uint8Array({ maxLength: 100 }), fc.integer({ min: 1, max: MAX_PAYLOAD - 100 }))
  .map(([b, more]) => [{ ...frame(OP.binary, b), declared: BigInt(b.length + more) }]);

/** A valid close frame: no payload, or a code a client may send and a reason. */
const validClose: fc.Arbitrary<FrameSpec[]> = fc.oneof(
  fc.constant<FrameSpec[]>([frame(OP.close, new Uint8Array())]),
  fc
    .tuple(fc.constantFrom(1000, 1001, 1003, 1011, 3000, 4000, 4999), fc.string({ maxLength: 40 }))
    .map(([code, reason]) => [frame(OP.close, closePayload(code, utf8(reason).subarray(0, 123)))]),
);

/** A client's frames: maybe a hello of cam-3 first, valid frames, then maybe broken, cut-off or
 * closing ones, then maybe more valid ones. */
export const clientFrames: fc.Arbitrary<FrameSpec[]> = fc
  .tuple(
    fc.boolean(),
    fc.array(validFrames, { maxLength: 3 }),
    fc.option(
      fc.oneof(
        { weight: 6, arbitrary: brokenFrames },
        { weight: 2, arbitrary: truncated },
        { weight: 1, arbitrary: validClose },
      ),
    ),
    fc.array(validFrames, { maxLength: 2 }),
  )
  .map(([hello, before, bad, after]) => [
    ...(hello ? [frame(OP.text, utf8(JSON.stringify(helloOf("cam-3"))))] : []),
    ...before.flat(),
    ...(bad ?? []),
    ...after.flat(),
  ]);

/** What a server must make of a client's frames. */
export interface Verdict {
  /** The close code of the first violation (1002 protocol, 1007 bad UTF-8, 1009 too big). */
  violation?: number;
  /** The client ended with a valid close frame (and this code, if it sent one). */
  clientClose?: { code?: number };
  /** A frame's data never all comes: only the client's end of the connection ends it. */
  incomplete: boolean;
  /** Complete data messages before the end: each may make the hub close with its own code. */
  messages: number;
  /** Payloads of the pings before the end, each owed a pong. */
  pings: Uint8Array[];
}

const validUtf8 = (b: Uint8Array) => {
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(b);
    return true;
  } catch {
    return false;
  }
};

function closeViolation(p: Uint8Array): number | undefined {
  if (p.length === 0) return undefined;
  if (p.length === 1) return 1002;
  const code = ((p[0] as number) << 8) | (p[1] as number);
  const ok = (code >= 1000 && code <= 1014 && ![1004, 1005, 1006].includes(code)) || code >= 3000;
  if (!ok || code > 4999) return 1002;
  return validUtf8(p.subarray(2)) ? undefined : 1007;
}

/** The header's own rules: reserved bits, opcodes, masking, control frames, the length. */
function headerViolation(f: FrameSpec): number | undefined {
  const control = f.opcode >= 8;
  if (f.rsv !== 0 || ![0, 1, 2, 8, 9, 10].includes(f.opcode) || !f.masked) return 1002;
  const len = f.declared ?? BigInt(f.payload.length);
  if (control && (!f.fin || len > 125n)) return 1002;
  if (len > BigInt(MAX_PAYLOAD)) return 1009;
  return undefined;
}

/** Walks the frames as RFC 6455 reads them; stops at the first violation, close or cut. */
export function verdictOf(frames: FrameSpec[]): Verdict {
  const v: Verdict = { incomplete: false, messages: 0, pings: [] };
  let open: { opcode: number; parts: Uint8Array[]; size: number } | undefined;
  for (const f of frames) {
    const bad = headerViolation(f);
    if (bad !== undefined) return { ...v, violation: bad };
    if (f.declared !== undefined) return { ...v, incomplete: true };
    if (f.opcode === OP.ping) v.pings.push(f.payload);
    if (f.opcode === OP.close) {
      const c = closeViolation(f.payload);
      if (c !== undefined) return { ...v, violation: c };
      const code =
        f.payload.length >= 2
          ? ((f.payload[0] as number) << 8) | (f.payload[1] as number)
          : undefined;
      return { ...v, clientClose: code === undefined ? {} : { code } };
    }
    if (f.opcode >= 8) continue;
    if ((f.opcode === OP.cont) !== (open !== undefined)) return { ...v, violation: 1002 };
    open ??= { opcode: f.opcode, parts: [], size: 0 };
    open.parts.push(f.payload);
    open.size += f.payload.length;
    if (open.size > MAX_PAYLOAD) return { ...v, violation: 1009 };
    if (!f.fin) continue;
    if (open.opcode === OP.text && !validUtf8(Buffer.concat(open.parts)))
      return { ...v, violation: 1007 };
    v.messages++;
    open = undefined;
  }
  return v;
}

/** One frame a server sent. */
export interface ServerFrame {
  opcode: number;
  payload: Uint8Array;
}

/** The complete frames at the start of `b` (a server's frames are unmasked). */
export function readServerFrames(b: Uint8Array): ServerFrame[] {
  const out: ServerFrame[] = [];
  const view = new DataView(b.buffer, b.byteOffset, b.byteLength);
  let at = 0;
  while (at + 2 <= b.length) {
    let len = (b[at + 1] as number) & 127;
    let head = 2;
    if (len === 126 && at + 4 <= b.length) [len, head] = [view.getUint16(at + 2), 4];
    else if (len === 127 && at + 10 <= b.length)
      [len, head] = [Number(view.getBigUint64(at + 2)), 10];
    else if (len >= 126) break;
    if (at + head + len > b.length) break;
    out.push({ opcode: (b[at] as number) & 15, payload: b.subarray(at + head, at + head + len) });
    at += head + len;
  }
  return out;
}
