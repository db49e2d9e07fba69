// Streams over the agent's connection (docs/protocol.md, "Streams"): the control messages as zod
// schemas, and the binary data frames. Shared by the hub and the agent; decoding never throws.
import { z } from "zod";

export const STREAM_DEFAULTS = {
  /** Streams per device at once. */
  maxStreams: 128,
  /** Credit each side gives at the start of a stream, in payload bytes. */
  windowBytes: 256 * 1024,
  /** The largest payload of one data frame. */
  maxFrameBytes: 32 * 1024,
} as const;

/** Bytes queued in a connection's socket above which data frames wait (status messages do not:
 * they wait behind at most this much data). */
export const STREAM_LOW_WATER = 256 * 1024;

/** Frame types (byte 0 of a binary frame). */
const FRAME_DATA = 1;
/** Header: type (1), stream id (4), channel (1). */
const FRAME_HEADER_BYTES = 6;

/** Channels: exec and attach stdin/stdout/stderr, logs on 1, port-forward on 0 both ways. */
export const CHANNEL = { stdin: 0, stdout: 1, stderr: 2, data: 0 } as const;

export type StreamKind = "logs" | "exec" | "attach" | "portforward";

const id = z.int().min(1).max(0x7fffffff);
const bytes = z.int().min(0).max(0x7fffffff);
const name = z.string().min(1).max(253);

export const streamErrorSchema = z.object({
  /** The HTTP status the hub answers a client with when the stream had not started. */
  code: z.int().min(400).max(599),
  /** The Kubernetes StatusReason. */
  reason: z.string().max(64),
  message: z.string().max(4096),
});
export type StreamError = z.output<typeof streamErrorSchema>;

const target = {
  id,
  namespace: name,
  pod: name,
  uid: z.string().max(128).optional(),
  container: z.string().max(253).optional(),
  /** Bytes the hub accepts now on this stream. */
  window: bytes,
};

export const streamOpenSchema = z.discriminatedUnion("kind", [
  z.object({
    type: z.literal("stream.open"),
    kind: z.literal("logs"),
    ...target,
    follow: z.boolean().optional(),
    previous: z.boolean().optional(),
    timestamps: z.boolean().optional(),
    tailLines: z.int().min(0).optional(),
    sinceSeconds: z.int().min(1).optional(),
    sinceTime: z.string().max(64).optional(),
    limitBytes: z.int().min(1).optional(),
  }),
  z.object({
    type: z.literal("stream.open"),
    kind: z.literal("exec"),
    ...target,
    command: z.array(z.string().max(65536)).min(1).max(1024),
    tty: z.boolean().optional(),
    stdin: z.boolean().optional(),
    stdout: z.boolean().optional(),
    stderr: z.boolean().optional(),
  }),
  z.object({
    type: z.literal("stream.open"),
    kind: z.literal("attach"),
    ...target,
    tty: z.boolean().optional(),
    stdin: z.boolean().optional(),
    stdout: z.boolean().optional(),
    stderr: z.boolean().optional(),
  }),
  z.object({
    type: z.literal("stream.open"),
    kind: z.literal("portforward"),
    ...target,
    port: z.int().min(1).max(65535),
  }),
]);
export type StreamOpen = z.output<typeof streamOpenSchema>;

const streamReadySchema = z.object({ type: z.literal("stream.ready"), id, window: bytes });
const streamWindowSchema = z.object({ type: z.literal("stream.window"), id, bytes });
const streamResizeSchema = z.object({
  type: z.literal("stream.resize"),
  id,
  width: z.int().min(0).max(65535),
  height: z.int().min(0).max(65535),
});
const streamEofSchema = z.object({ type: z.literal("stream.eof"), id });
const streamCloseSchema = z.object({
  type: z.literal("stream.close"),
  id,
  exitCode: z.int().optional(),
  error: streamErrorSchema.optional(),
});

/** What the agent receives (stream.open by its kind), and what the hub receives. */
const hubControlSchema = z.discriminatedUnion("type", [
  streamWindowSchema,
  streamResizeSchema,
  streamEofSchema,
  streamCloseSchema,
]);
const hubStreamMessageSchema = z.union([streamOpenSchema, hubControlSchema]);
const agentStreamMessageSchema = z.discriminatedUnion("type", [
  streamReadySchema,
  streamWindowSchema,
  streamCloseSchema,
]);
export type HubStreamMessage = z.output<typeof hubStreamMessageSchema>;

export const isStreamType = (type: string): boolean => type.startsWith("stream.");

/** A stream message decoded, or why not (with the stream it names when readable). */
export type DecodedStream<M> =
  | { ok: true; message: M }
  | { ok: false; id?: number; reason: string };

function decodeWith<M>(schema: z.ZodType<M>, value: Record<string, unknown>): DecodedStream<M> {
  const r = schema.safeParse(value);
  if (r.success) return { ok: true, message: r.data };
  const issue = r.error.issues[0];
  const where = issue?.path.map(String).join(".") ?? "";
  // A type that is not a string may be an object whose toString is not a function.
  const type = typeof value.type === "string" ? value.type : "stream";
  const reason = `bad ${type} message: ${where === "" ? "" : `${where}: `}${issue?.message ?? "invalid"}`;
  const sid = value.id;
  return typeof sid === "number" && Number.isInteger(sid) && sid > 0
    ? { ok: false, id: sid, reason }
    : { ok: false, reason };
}

export const decodeHubStreamMessage = (
  v: Record<string, unknown>,
): DecodedStream<HubStreamMessage> =>
  v.type === "stream.open" ? decodeWith(streamOpenSchema, v) : decodeWith(hubControlSchema, v);
export const decodeAgentStreamMessage = (v: Record<string, unknown>) =>
  decodeWith(agentStreamMessageSchema, v);

/** One data frame: type, stream id, channel, payload. */
export function encodeFrame(streamId: number, channel: number, payload: Uint8Array): Uint8Array {
  const out = new Uint8Array(FRAME_HEADER_BYTES + payload.length);
  out[0] = FRAME_DATA;
  new DataView(out.buffer).setUint32(1, streamId);
  out[5] = channel;
  out.set(payload, FRAME_HEADER_BYTES);
  return out;
}

/** A received binary frame, or why it is not one (with its stream id when readable). */
export type DecodedFrame =
  | { ok: true; id: number; channel: number; payload: Uint8Array }
  | { ok: false; id?: number; reason: string };

export function decodeFrame(data: Uint8Array, maxPayload: number): DecodedFrame {
  if (data.length < FRAME_HEADER_BYTES)
    return { ok: false, reason: `a data frame of ${data.length} bytes is shorter than its header` };
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const sid = view.getUint32(1);
  if (data[0] !== FRAME_DATA)
    return { ok: false, id: sid, reason: `unknown frame type ${data[0]}` };
  const payload = data.subarray(FRAME_HEADER_BYTES);
  if (payload.length === 0) return { ok: false, id: sid, reason: "a data frame without payload" };
  if (payload.length > maxPayload)
    return {
      ok: false,
      id: sid,
      reason: `a data frame of ${payload.length} bytes is over the limit of ${maxPayload}`,
    };
  return { ok: true, id: sid, channel: data[5] ?? 0, payload };
}

/** The channels a stream of `kind` may carry from the hub (to the agent) and from the agent. */
export function channelsOf(kind: StreamKind): { fromHub: number[]; fromAgent: number[] } {
  if (kind === "exec" || kind === "attach")
    return { fromHub: [CHANNEL.stdin], fromAgent: [CHANNEL.stdout, CHANNEL.stderr] };
  if (kind === "logs") return { fromHub: [], fromAgent: [CHANNEL.stdout] };
  return { fromHub: [CHANNEL.data], fromAgent: [CHANNEL.data] };
}
