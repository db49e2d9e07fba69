// The agent ↔ hub messages of protocol version 1 (docs/protocol.md), as zod schemas. Each side
// decodes what it receives with decodeAgentMessage/decodeHubMessage: unknown fields are dropped
// (a newer peer may add optional ones), a wrong type or an unknown `type` is refused.
import { z } from "zod";
import { deviceHealthSchema } from "./health.ts";
import { eventSchema, nodeSchema, nodeStatusSchema, podSchema } from "./objects.ts";
import { updateSchema, updateStatusSchema } from "./update.ts";

/** Features an agent announces in hello (docs/protocol.md, "Desired state"). */
export const AGENT_FEATURES = {
  /** Runs the pods of its desired state. */
  desiredPods: "desired-pods",
  /** Also takes the ConfigMaps and Secrets of its desired state. */
  desiredConfig: "desired-config",
  /** Runs logs, exec and port-forward streams (docs/protocol.md, "Streams"). */
  streams: "streams",
  /** Takes agent updates (docs/agent-updates.md); it may still refuse each, saying why. */
  updates: "updates",
} as const;

/** The protocol version this build speaks. */
export const PROTOCOL_VERSION = 1;
/** The versions a hub of this build accepts in `hello`. */
export const SUPPORTED_PROTOCOL_VERSIONS: readonly number[] = [1];

const seq = z.int().min(1).max(Number.MAX_SAFE_INTEGER);
const generation = z.int().min(0).max(Number.MAX_SAFE_INTEGER);
/** A DNS-1123 subdomain, as node names are (checked in full by the hub on join). */
const nodeName = z.string().min(1).max(253);
const uid = z.string().min(1).max(128);
/** A wall-clock reading in ms since the epoch (docs/protocol.md, "Clock skew"). */
const wallClock = z.int().min(0).max(Number.MAX_SAFE_INTEGER);

// ---- agent → hub ----

const helloSchema = z.object({
  type: z.literal("hello"),
  protocolVersion: z.int(),
  nodeName,
  agentVersion: z.string().max(128),
  /** Names the agent's outbox; a new id means the agent lost what it had sent. */
  streamId: z.string().min(1).max(64),
  /** The highest seq the agent saw acknowledged (informational; the hub's `ackedSeq` rules). */
  lastAckedSeq: z.int().min(0).optional(),
  /** The desired-state generation the agent has saved on disk. */
  desiredGeneration: generation.optional(),
  /** What this agent does beyond reporting (AGENT_FEATURES); absent on older agents. */
  features: z.array(z.string().max(64)).max(32).optional(),
  /** The agent's wall clock when it sent hello (ms since the epoch), for the hub's skew. */
  clock: wallClock.optional(),
});

const nodeMessageSchema = z.object({ type: z.literal("node"), seq, node: nodeSchema });

const nodePatchSchema = z.object({
  type: z.literal("node.patch"),
  seq,
  /** Each field present replaces that whole field of the node's status. */
  status: nodeStatusSchema,
});

const podUpsertSchema = z
  .object({ type: z.literal("pod.upsert"), seq, uid, pod: podSchema })
  .refine((m) => m.pod.metadata.uid === undefined || m.pod.metadata.uid === m.uid, {
    message: "pod.metadata.uid differs from uid",
    path: ["pod", "metadata", "uid"],
  });

const podDeleteSchema = z.object({ type: z.literal("pod.delete"), seq, uid });

const eventMessageSchema = z.object({ type: z.literal("event"), seq, event: eventSchema });

const heartbeatSchema = z.object({
  type: z.literal("hb"),
  /** The agent's wall clock when it sent hb (ms since the epoch); absent in the hub's answer. */
  clock: wallClock.optional(),
  /** The round trip of the agent's last answered hb or hello (ms, monotonic). */
  rttMs: z.int().min(0).max(3_600_000).optional(),
});

/** The device's health (docs/protocol.md, "Device health"): not sequenced, the latest wins. */
const healthMessageSchema = z.object({ type: z.literal("health"), health: deviceHealthSchema });

/** Asks for a new node credential over the connection (docs/protocol.md, "Rotating the node
 * credential"); sent only to a hub whose welcome carried `credential`. */
const credentialRequestSchema = z.object({ type: z.literal("credential.request") });

/** The credential the hub sent is saved on disk: the hub forgets the old one. */
const credentialSavedSchema = z.object({ type: z.literal("credential.saved") });

/** A hub pod of the stored desired state that the device does not run (name taken by a file pod). */
const desiredConflictSchema = z.object({
  /** namespace/name */
  pod: z.string().max(320),
  uid,
  message: z.string().max(1024),
});

const desiredAckSchema = z.object({
  type: z.literal("desired.ack"),
  /** The generation stored on disk and applied. */
  generation,
  /** The last desired message refused (the device kept `generation`), and why. */
  refused: z.object({ generation: generation.optional(), reason: z.string().max(4096) }).optional(),
  conflicts: z.array(desiredConflictSchema).max(1000).optional(),
});

export const agentMessageSchema = z.discriminatedUnion("type", [
  helloSchema,
  nodeMessageSchema,
  nodePatchSchema,
  podUpsertSchema,
  podDeleteSchema,
  eventMessageSchema,
  heartbeatSchema,
  desiredAckSchema,
  credentialRequestSchema,
  credentialSavedSchema,
  healthMessageSchema,
  updateStatusSchema,
]);

export type Hello = z.output<typeof helloSchema>;
type NodeMessage = z.output<typeof nodeMessageSchema>;
type NodePatch = z.output<typeof nodePatchSchema>;
type PodUpsert = z.output<typeof podUpsertSchema>;
type PodDelete = z.output<typeof podDeleteSchema>;
type EventMessage = z.output<typeof eventMessageSchema>;
export type DesiredAck = z.output<typeof desiredAckSchema>;
export type DesiredConflict = z.output<typeof desiredConflictSchema>;
export type AgentMessage = z.output<typeof agentMessageSchema>;
/** The agent messages that carry a seq (kept in the agent's outbox until acknowledged). */
export type SequencedMessage = NodeMessage | NodePatch | PodUpsert | PodDelete | EventMessage;

const sequencedTypes = new Set(["node", "node.patch", "pod.upsert", "pod.delete", "event"]);
export function isSequenced(m: AgentMessage): m is SequencedMessage {
  return sequencedTypes.has(m.type);
}

// ---- hub → agent ----

const errorCodes = [
  "unauthorized",
  "revoked",
  "forbidden",
  "unsupported-version",
  "malformed",
  "unknown-type",
  "protocol",
  "too-large",
  "rate-limited",
  "replaced",
  "shutting-down",
] as const;
export type ErrorCode = (typeof errorCodes)[number];

/** The WebSocket close code that goes with each error code. */
export const CLOSE_CODES: Record<ErrorCode, number> = {
  unauthorized: 4401,
  revoked: 4403,
  forbidden: 4403,
  "unsupported-version": 4426,
  malformed: 4400,
  "unknown-type": 4400,
  protocol: 4400,
  "too-large": 4413,
  "rate-limited": 4429,
  replaced: 4409,
  "shutting-down": 1001,
};

const credentialTimesSchema = z.object({
  /** RFC 3339. */
  expiresAt: z.string().max(64),
  renewInMs: z.int().min(0).max(Number.MAX_SAFE_INTEGER),
});

const welcomeSchema = z.object({
  type: z.literal("welcome"),
  protocolVersion: z.int(),
  heartbeatIntervalMs: z.int().min(1),
  /** The highest seq of this stream the hub has stored: the agent resends what follows. */
  ackedSeq: z.int().min(0),
  maxMessageBytes: z.int().min(1),
  rateLimit: z.object({ messagesPerSecond: z.number().positive(), burst: z.int().min(1) }),
  /** Stream settings, to an agent that announced "streams" (docs/protocol.md, "Streams"). */
  streams: z
    .object({
      maxStreams: z.int().min(1),
      windowBytes: z.int().min(1024),
      maxFrameBytes: z.int().min(1024),
    })
    .optional(),
  /** The connection's credential: when it expires, and in how long to ask for a new one
   * (a duration, so that a device's wrong clock does not matter). Absent from older hubs. */
  credential: credentialTimesSchema.optional(),
});

const ackSchema = z.object({ type: z.literal("ack"), seq });

/**
 * The node's whole desired state. The objects are decoded by the agent itself (with the API's
 * validation and field errors), so that a bad object is refused without closing the connection.
 */
const desiredSchema = z.object({
  type: z.literal("desired"),
  generation,
  pods: z.array(z.unknown()),
  configMaps: z.array(z.unknown()).optional(),
  secrets: z.array(z.unknown()).optional(),
});

const errorSchema = z.object({
  type: z.literal("error"),
  code: z.enum(errorCodes),
  reason: z.string(),
});

/** A new node credential, the answer to credential.request. */
const credentialSchema = z.object({
  type: z.literal("credential"),
  credential: z.string().min(1).max(256),
  ...credentialTimesSchema.shape,
});

export const hubMessageSchema = z.discriminatedUnion("type", [
  welcomeSchema,
  ackSchema,
  heartbeatSchema,
  desiredSchema,
  errorSchema,
  credentialSchema,
  updateSchema,
]);

export type Welcome = z.output<typeof welcomeSchema>;
export type Desired = z.output<typeof desiredSchema>;
export type ErrorMessage = z.output<typeof errorSchema>;
export type CredentialMessage = z.output<typeof credentialSchema>;
export type HubMessage = z.output<typeof hubMessageSchema>;
