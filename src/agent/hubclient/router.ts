// The message-routing part of a hub session: decodes each frame from the hub and calls the
// handler for its type. A frame that does not decode is refused (the session closes with the
// code of its error), except a bad `desired` after welcome, which goes to its handler with the
// reason (the device keeps its state and says why, without closing). A handler that throws is
// logged; routing never throws.
import {
  CLOSE_CODES,
  type Desired,
  decodeHubMessage,
  type ErrorMessage,
  type HubMessage,
  type Welcome,
} from "../../protocol/index.ts";
import type { Logger } from "../../util/log.ts";

/** A desired message as decoded, or why it could not be (with its generation when readable). */
export type DesiredReceived =
  | { ok: true; message: Desired }
  | { ok: false; reason: string; generation?: number };

export interface HubMessageHandlers {
  welcome(w: Welcome): void;
  ack(seq: number): void;
  desired(d: DesiredReceived): void;
  error(e: ErrorMessage): void;
  /** Every other message the session knows (heartbeats need nothing). */
  other?(m: HubMessage): void;
  /** Binary frames and messages the session does not route itself (streams), or undefined. */
  extension?: {
    /** Whether this decoded-as-unknown text frame of `type` is the extension's. */
    owns(type: string): boolean;
    text(value: Record<string, unknown>): void;
    binary(data: Uint8Array): void;
  };
  /** The frame cannot be accepted: close with `code`. */
  refuse(code: number, reason: string): void;
}

/** The `generation` of an undecodable desired message, when it has a usable one. */
function generationOf(data: string | ArrayBuffer | Uint8Array): { generation?: number } {
  try {
    const g = (JSON.parse(String(data)) as { generation?: unknown }).generation;
    return typeof g === "number" && Number.isSafeInteger(g) && g >= 0 ? { generation: g } : {};
  } catch {
    return {};
  }
}

/** The type of a text frame owned by the extension, with its parsed value; else undefined. */
function extensionMessage(
  data: string,
  owns: (type: string) => boolean,
): Record<string, unknown> | undefined {
  if (!data.includes('"stream.')) return undefined;
  try {
    const value = JSON.parse(data) as Record<string, unknown>;
    return typeof value.type === "string" && owns(value.type) ? value : undefined;
  } catch {
    return undefined;
  }
}

/** Routes one received frame; `welcomed` tells whether welcome already came. */
export function routeHubFrame(
  data: string | ArrayBuffer | Uint8Array,
  welcomed: boolean,
  h: HubMessageHandlers,
  log: Logger,
): void {
  const ext = h.extension;
  if (ext !== undefined && welcomed && typeof data !== "string") {
    guarded(log, "binary", () =>
      ext.binary(data instanceof Uint8Array ? data : new Uint8Array(data)),
    );
    return;
  }
  if (ext !== undefined && welcomed && typeof data === "string") {
    const value = extensionMessage(data, ext.owns);
    if (value !== undefined) {
      guarded(log, String(value.type), () => ext.text(value));
      return;
    }
  }
  const decoded = decodeHubMessage(data);
  if (!decoded.ok && decoded.type === "desired" && welcomed) {
    guarded(log, "desired", () =>
      h.desired({ ok: false, reason: decoded.reason, ...generationOf(data) }),
    );
    return;
  }
  if (!decoded.ok) {
    log.warn("refused a message from the hub", { code: decoded.code, reason: decoded.reason });
    h.refuse(CLOSE_CODES[decoded.code], decoded.reason.slice(0, 120));
    return;
  }
  const m = decoded.message;
  guarded(log, m.type, () => dispatch(m, h));
}

function dispatch(m: HubMessage, h: HubMessageHandlers): void {
  if (m.type === "welcome") h.welcome(m);
  else if (m.type === "ack") h.ack(m.seq);
  else if (m.type === "desired") h.desired({ ok: true, message: m });
  else if (m.type === "error") h.error(m);
  else h.other?.(m);
}

function guarded(log: Logger, type: string, fn: () => void): void {
  try {
    fn();
  } catch (err) {
    log.error("handling a message from the hub failed", { type, error: err });
  }
}
