// The messages of a stream relayed between hub replicas on NATS (docs/hub-replicas.md, "Streams
// across replicas"). Decoding never throws: what does not decode is reported with a reason.
//   fleet.open.<name>          request: {"req": <stream.open>}  answer: accepted or refused
//   fleet.stream.<id>.in       the requesting replica → the holder (input, credit for out, end)
//   fleet.stream.<id>.out      the holder → the requesting replica (output, credit for in, end)
//   fleet.ask.<name>           request: {"ask": "health"}  answer: {"ok": true, "value": …} or
//                              refused (what the holder holds of the node: its health history)
// Each message on a direction's subject is [type (1)][seq (4, from 0, one more each message)]
// then, for data, [channel (1)][payload (1 byte to 256 KiB)], for control, a JSON object.
import { z } from "zod";
import {
  describeZodError,
  type StreamError,
  type StreamOpen,
  streamErrorSchema,
  streamOpenSchema,
} from "../../protocol/index.ts";

/** The largest payload of one data message (NATS's default message limit is 1 MiB). */
export const MAX_CHUNK_BYTES = 256 * 1024;
/** The largest control message or open request (a stream.open carries an exec's command). */
const MAX_JSON_BYTES = 256 * 1024;

const TYPE_DATA = 1;
const TYPE_CONTROL = 2;
const HEADER_BYTES = 5;

// Not under fleet.node.>: every replica's bus listens there (bus-codec.ts), and a request that
// reaches any subscriber is never answered "no responders", so a node no replica holds would wait
// for the open's timeout instead of failing at once.
export const openSubject = (node: string) => `fleet.open.${node}`;
export const streamSubject = (id: string, dir: "in" | "out") => `fleet.stream.${id}.${dir}`;
export const askSubject = (node: string) => `fleet.ask.${node}`;

const streamId = z.string().regex(/^[0-9a-f]{32}$/);
const bytes = z.int().min(0).max(0x7fffffff);

const openRequestSchema = z.object({ req: streamOpenSchema });
const openAnswerSchema = z.discriminatedUnion("ok", [
  /** Accepted: the stream's subjects, and the credit the holder gives for input. */
  z.object({ ok: z.literal(true), id: streamId, window: bytes }),
  z.object({ ok: z.literal(false), error: streamErrorSchema }),
]);
export type OpenAnswer = z.output<typeof openAnswerSchema>;

/** What one replica may ask the holder of a node. */
export type NodeQuestion = "health";
const askRequestSchema = z.object({ ask: z.literal("health") });
const askAnswerSchema = z.discriminatedUnion("ok", [
  z.object({ ok: z.literal(true), value: z.unknown() }),
  z.object({ ok: z.literal(false), error: streamErrorSchema }),
]);
export type AskAnswer = z.output<typeof askAnswerSchema>;
/** The largest answer to an ask (under NATS's default message limit of 1 MiB). */
const MAX_ANSWER_BYTES = 1000 * 1024;

const controlSchema = z.discriminatedUnion("t", [
  /** The reader may take `bytes` more of payload. */
  z.object({ t: z.literal("credit"), bytes: bytes.min(1) }),
  /** Nothing else to say: the sender is alive. */
  z.object({ t: z.literal("ping") }),
  z.object({
    t: z.literal("resize"),
    width: z.int().min(0).max(65535),
    height: z.int().min(0).max(65535),
  }),
  /** The client closed its input (in only). */
  z.object({ t: z.literal("eof") }),
  /** The sender ends the stream: out, the work ended; in, the client left (or failed). */
  z.object({
    t: z.literal("end"),
    exitCode: z.int().optional(),
    error: streamErrorSchema.optional(),
  }),
]);
export type Control = z.output<typeof controlSchema>;

export type RelayMessage =
  | { type: "data"; seq: number; channel: number; payload: Uint8Array }
  | { type: "control"; seq: number; control: Control };

type Decoded<T> = { ok: true; value: T } | { ok: false; reason: string };

function parseJson<S extends z.ZodType>(
  schema: S,
  data: Uint8Array,
  limit = MAX_JSON_BYTES,
): Decoded<z.output<S>> {
  if (data.length > limit) return { ok: false, reason: `over the limit of ${limit} bytes` };
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder().decode(data));
  } catch (err) {
    return { ok: false, reason: `not JSON: ${(err as Error).message}` };
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) return { ok: false, reason: describeZodError(parsed.error) };
  return { ok: true, value: parsed.data };
}

export const encodeOpenRequest = (req: StreamOpen): string => JSON.stringify({ req });
export const decodeOpenRequest = (data: Uint8Array): Decoded<StreamOpen> => {
  const d = parseJson(openRequestSchema, data);
  return d.ok ? { ok: true, value: d.value.req } : d;
};
export const encodeOpenAnswer = (a: OpenAnswer): string => JSON.stringify(a);
export const decodeOpenAnswer = (data: Uint8Array): Decoded<OpenAnswer> =>
  parseJson(openAnswerSchema, data);

export const encodeAsk = (ask: NodeQuestion): string => JSON.stringify({ ask });
export const decodeAsk = (data: Uint8Array): Decoded<NodeQuestion> => {
  const d = parseJson(askRequestSchema, data);
  return d.ok ? { ok: true, value: d.value.ask } : d;
};
/** The answer's text; refused when the value is over the limit. */
export function encodeAskAnswer(a: AskAnswer): string {
  const text = JSON.stringify(a);
  if (text.length <= MAX_ANSWER_BYTES) return text;
  const message = `the answer of ${text.length} bytes is over the limit of ${MAX_ANSWER_BYTES}`;
  return JSON.stringify({ ok: false, error: { code: 500, reason: "InternalError", message } });
}
export const decodeAskAnswer = (data: Uint8Array): Decoded<AskAnswer> =>
  parseJson(askAnswerSchema, data, MAX_ANSWER_BYTES);

export function encodeData(seq: number, channel: number, payload: Uint8Array): Uint8Array {
  const out = new Uint8Array(HEADER_BYTES + 1 + payload.length);
  out[0] = TYPE_DATA;
  new DataView(out.buffer).setUint32(1, seq);
  out[HEADER_BYTES] = channel;
  out.set(payload, HEADER_BYTES + 1);
  return out;
}

export function encodeControl(seq: number, control: Control): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify(control));
  const out = new Uint8Array(HEADER_BYTES + json.length);
  out[0] = TYPE_CONTROL;
  new DataView(out.buffer).setUint32(1, seq);
  out.set(json, HEADER_BYTES);
  return out;
}

/** A message received on a direction's subject, or why it is not one. */
export function decodeRelayMessage(data: Uint8Array): Decoded<RelayMessage> {
  if (data.length < HEADER_BYTES)
    return { ok: false, reason: `a message of ${data.length} bytes is shorter than its header` };
  const seq = new DataView(data.buffer, data.byteOffset, data.byteLength).getUint32(1);
  if (data[0] === TYPE_DATA) {
    const payload = data.subarray(HEADER_BYTES + 1);
    if (payload.length === 0) return { ok: false, reason: "a data message without payload" };
    if (payload.length > MAX_CHUNK_BYTES)
      return {
        ok: false,
        reason: `a data message of ${payload.length} bytes is over the limit of ${MAX_CHUNK_BYTES}`,
      };
    return { ok: true, value: { type: "data", seq, channel: data[HEADER_BYTES] ?? 0, payload } };
  }
  if (data[0] !== TYPE_CONTROL) return { ok: false, reason: `unknown message type ${data[0]}` };
  const c = parseJson(controlSchema, data.subarray(HEADER_BYTES));
  if (!c.ok) return { ok: false, reason: `bad control message: ${c.reason}` };
  return { ok: true, value: { type: "control", seq, control: c.value } };
}

/** The error a stream ends with when the other replica says nothing for `ms`. */
export const silenceError = (ms: number, who: string): StreamError => ({
  code: 504,
  reason: "Timeout",
  message: `the hub replica ${who} said nothing for ${ms} ms (it may have stopped)`,
});
