// Bus messages on NATS (docs/hub-replicas.md): the subject names the message and its node, the
// body is a JSON object checked with zod on the way in, as the agent's messages are. Unknown
// fields are dropped (a newer replica may add optional ones); anything else wrong is refused with
// a reason, never thrown.
//   fleet.changes              {"rv": 42, "origin": "<uuid>"}   (origin optional)
//   fleet.node.<name>.desired  {}
//   fleet.node.<name>.taken    {"replica": "hub-a", "epoch": 7}
// A node's name is a DNS-1123 subdomain and may hold dots, which NATS reads as token separators:
// the name is every token between "fleet.node." and the last one.
import { z } from "zod";
import { isDNS1123Subdomain } from "../api/index.ts";
import { describeZodError } from "../protocol/index.ts";
import type { BusMessage } from "./bus.ts";

export const CHANGES_SUBJECT = "fleet.changes";
/** Every node's subjects; the last token says which message (desired, taken, or another
 * feature's, which the bus leaves alone). */
export const NODE_SUBJECTS = "fleet.node.>";
const NODE_PREFIX = "fleet.node.";

/** The largest body accepted (a bus message is a few dozen bytes). */
const MAX_BODY_BYTES = 4096;

const count = z.int().min(0).max(Number.MAX_SAFE_INTEGER);
const bodySchemas = {
  changes: z.object({ rv: count, origin: z.string().min(1).max(64).optional() }),
  desired: z.object({}),
  taken: z.object({ replica: z.string().min(1).max(253), epoch: count }),
};

type Encoded = { ok: true; subject: string; body: string } | { ok: false; reason: string };
export type DecodedBusMessage =
  | { ok: true; message: BusMessage }
  /** Not a bus message at all (another feature's subject under fleet.node): ignore quietly. */
  | { ok: false; ignore: true }
  | { ok: false; ignore?: false; reason: string };

function badNode(node: string): string | undefined {
  const errs = isDNS1123Subdomain(node);
  return errs.length === 0 ? undefined : `invalid node name ${JSON.stringify(node)}: ${errs[0]}`;
}

/** The subject and JSON body of `m`, or why it cannot be sent. */
export function encodeBusMessage(m: BusMessage): Encoded {
  if (m.type === "changes")
    return {
      ok: true,
      subject: CHANGES_SUBJECT,
      body: JSON.stringify({ rv: m.rv, ...(m.origin !== undefined && { origin: m.origin }) }),
    };
  const bad = badNode(m.node);
  if (bad !== undefined) return { ok: false, reason: bad };
  const subject = `${NODE_PREFIX}${m.node}.${m.type}`;
  if (m.type === "desired") return { ok: true, subject, body: "{}" };
  return { ok: true, subject, body: JSON.stringify({ replica: m.replica, epoch: m.epoch }) };
}

function parseBody<S extends z.ZodType>(
  schema: S,
  body: string,
): { ok: true; value: z.infer<S> } | { ok: false; reason: string } {
  if (Buffer.byteLength(body, "utf8") > MAX_BODY_BYTES)
    return { ok: false, reason: `body is over the limit of ${MAX_BODY_BYTES} bytes` };
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch (err) {
    return { ok: false, reason: `body is not JSON: ${(err as Error).message}` };
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) return { ok: false, reason: describeZodError(parsed.error) };
  return { ok: true, value: parsed.data };
}

/** The message a subject and body received from NATS stand for. Never throws. */
export function decodeBusMessage(subject: string, body: string): DecodedBusMessage {
  if (subject === CHANGES_SUBJECT) {
    const b = parseBody(bodySchemas.changes, body);
    if (!b.ok) return bad(subject, b);
    const { rv, origin } = b.value;
    return { ok: true, message: { type: "changes", rv, ...(origin !== undefined && { origin }) } };
  }
  if (!subject.startsWith(NODE_PREFIX)) return { ok: false, ignore: true };
  const last = subject.lastIndexOf(".");
  const kind = subject.slice(last + 1);
  if (kind !== "desired" && kind !== "taken") return { ok: false, ignore: true };
  const node = subject.slice(NODE_PREFIX.length, last);
  const badName = badNode(node);
  if (badName !== undefined) return { ok: false, reason: `${subject}: ${badName}` };
  if (kind === "desired") {
    const b = parseBody(bodySchemas.desired, body);
    return b.ok ? { ok: true, message: { type: "desired", node } } : bad(subject, b);
  }
  const b = parseBody(bodySchemas.taken, body);
  return b.ok ? { ok: true, message: { type: "taken", node, ...b.value } } : bad(subject, b);
}

function bad(subject: string, b: { reason: string }): DecodedBusMessage {
  return { ok: false, reason: `${subject}: ${b.reason}` };
}
