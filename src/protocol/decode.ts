// Decoding a received WebSocket frame into a message, or into the error the receiver sends
// before closing (docs/protocol.md, "Errors and limits"). Never throws.
import type { z } from "zod";
import {
  type AgentMessage,
  agentMessageSchema,
  type ErrorCode,
  type HubMessage,
  hubMessageSchema,
} from "./messages.ts";

/** The default limit on one message, in bytes. */
export const DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024;

/** A refusal names the message's `type` when it had a known one (the agent treats a bad
 * `desired` apart: it keeps its state and says why, without closing). */
export type Decoded<M> =
  | { ok: true; message: M }
  | { ok: false; code: ErrorCode; reason: string; type?: string };

const HEARTBEAT = '{"type":"hb"}';
const heartbeat = { type: "hb" } as const;

/** "pod.status.phase: Invalid option ..." for the first problem zod found. */
export function describeZodError(error: z.ZodError): string {
  const issue = error.issues[0];
  if (issue === undefined) return "invalid message";
  const path = issue.path.map(String).join(".");
  return path === "" ? issue.message : `${path}: ${issue.message}`;
}

function byteLength(data: string | ArrayBufferLike | Uint8Array): number {
  if (typeof data === "string") return Buffer.byteLength(data, "utf8");
  return data.byteLength;
}

function decodeWith<M>(
  schema: z.ZodType<M>,
  knownTypes: ReadonlySet<string>,
  data: string | ArrayBufferLike | Uint8Array,
  maxBytes: number,
): Decoded<M> {
  const size = byteLength(data);
  if (size > maxBytes)
    return {
      ok: false,
      code: "too-large",
      reason: `message of ${size} bytes is over the limit of ${maxBytes}`,
    };
  if (typeof data !== "string")
    return {
      ok: false,
      code: "malformed",
      reason: "binary frames are not accepted; send JSON text",
    };
  if (data === HEARTBEAT) return { ok: true, message: heartbeat as M };
  let value: unknown;
  try {
    value = JSON.parse(data);
  } catch (err) {
    return {
      ok: false,
      code: "malformed",
      reason: `message is not JSON: ${(err as Error).message}`,
    };
  }
  if (typeof value !== "object" || value === null || Array.isArray(value))
    return { ok: false, code: "malformed", reason: "message is not a JSON object" };
  const type = (value as { type?: unknown }).type;
  if (typeof type !== "string")
    return { ok: false, code: "malformed", reason: 'message has no string "type"' };
  if (!knownTypes.has(type))
    return {
      ok: false,
      code: "unknown-type",
      reason: `unknown message type ${JSON.stringify(type.slice(0, 64))}`,
    };
  const parsed = schema.safeParse(value);
  if (!parsed.success)
    return {
      ok: false,
      code: "malformed",
      reason: `bad ${type} message: ${describeZodError(parsed.error)}`,
      type,
    };
  return { ok: true, message: parsed.data };
}

const agentTypes = new Set([
  "hello",
  "node",
  "node.patch",
  "pod.upsert",
  "pod.delete",
  "event",
  "hb",
  "desired.ack",
  "credential.request",
  "credential.saved",
  "health",
  "update.status",
]);
const hubTypes = new Set(["welcome", "ack", "hb", "desired", "error", "credential", "update"]);

/** Decodes a frame the hub received from an agent. */
export function decodeAgentMessage(
  data: string | ArrayBufferLike | Uint8Array,
  maxBytes = DEFAULT_MAX_MESSAGE_BYTES,
): Decoded<AgentMessage> {
  return decodeWith(agentMessageSchema, agentTypes, data, maxBytes);
}

/** Decodes a frame the agent received from the hub. */
export function decodeHubMessage(
  data: string | ArrayBufferLike | Uint8Array,
  maxBytes = DEFAULT_MAX_MESSAGE_BYTES * 16,
): Decoded<HubMessage> {
  return decodeWith(hubMessageSchema, hubTypes, data, maxBytes);
}
