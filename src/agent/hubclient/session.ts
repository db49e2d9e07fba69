// One connection to the hub, from dial to close (docs/protocol.md, "The connection"): sends
// hello, waits for welcome, then sends every outbox entry after the hub's ackedSeq in seq order
// within the hub's rate limit, applies acks, answers desired with the desired.ack its handler
// returns, sends heartbeats and gives up on a hub silent for three heartbeat intervals. A
// message from the hub that does not decode is logged and refused by closing the connection,
// except a bad `desired`, which goes to the handler (the device keeps its state and says why);
// nothing here throws to the caller, and nothing here touches pods.
import {
  CLOSE_CODES,
  type Desired,
  type DesiredAck,
  decodeHubMessage,
  type ErrorMessage,
  type Hello,
  type HubMessage,
  PROTOCOL_VERSION,
  type SequencedMessage,
  type Welcome,
} from "../../protocol/index.ts";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import type { Outbox } from "./outbox.ts";
import type { Dial, HubSocket } from "./socket.ts";

/** A desired message as decoded, or why it could not be (with its generation when readable). */
export type DesiredReceived =
  | { ok: true; message: Desired }
  | { ok: false; reason: string; generation?: number };

/** How one connection ended. */
export interface SessionResult {
  /** The hub answered hello with welcome. */
  welcomed: boolean;
  /** From dial to close (ms). */
  durationMs: number;
  code: number;
  reason: string;
  /** The hub's `error` message, when it sent one before closing. */
  error?: ErrorMessage;
}

export interface SessionDeps {
  clock: Clock;
  logger: Logger;
  dial: Dial;
  url: string;
  credential: string;
  hello: Omit<Hello, "type" | "protocolVersion">;
  outbox: Outbox;
  /** Called on welcome, before the outbox is sent: push what converges the hub's view. */
  onWelcome(welcome: Welcome): void;
  /** Takes a desired state from the hub (or why one could not be decoded) and returns the
   * desired.ack to answer with. */
  onDesired(desired: DesiredReceived): Omit<DesiredAck, "type">;
  /** No welcome within this long closes the connection (10 s by default). */
  welcomeTimeoutMs?: number;
}

export interface Session {
  readonly done: Promise<SessionResult>;
  /** The outbox has new entries: send them when the rate limit allows. */
  wake(): void;
  /** Closes the connection (agent stopping). */
  close(code: number, reason: string): void;
  /** Sends a desired.ack report now, if welcomed (its state changed). */
  report(ack: Omit<DesiredAck, "type">): void;
  readonly welcomed: boolean;
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

/** Bytes left queued in the socket before the session waits for it to drain. */
const MAX_BUFFERED = 1024 * 1024;

export function startSession(deps: SessionDeps): Session {
  const { clock, outbox } = deps;
  const log = deps.logger;
  const started = clock.now();
  let socket: HubSocket | undefined;
  let welcome: Welcome | undefined;
  let hubError: ErrorMessage | undefined;
  let finished = false;
  let cursor = 0;
  let tokens = 0;
  let refilledAt = started;
  let lastSent = started;
  let lastHeard = started;
  let pumpTimer: (() => void) | undefined;
  const timers = new Set<() => void>();
  let resolve: (r: SessionResult) => void = () => {};
  const done = new Promise<SessionResult>((r) => {
    resolve = r;
  });

  const timer = (ms: number, fn: () => void): (() => void) => {
    const cancel = clock.setTimer(ms, () => {
      timers.delete(cancel);
      fn();
    });
    timers.add(cancel);
    return cancel;
  };

  function finish(code: number, reason: string): void {
    if (finished) return;
    finished = true;
    for (const cancel of timers) cancel();
    timers.clear();
    resolve({
      welcomed: welcome !== undefined,
      durationMs: clock.now() - started,
      code,
      reason,
      ...(hubError !== undefined && { error: hubError }),
    });
  }

  function close(code: number, reason: string): void {
    if (finished) return;
    try {
      socket?.close(code, reason);
    } catch (err) {
      log.debug("closing the hub socket failed", { error: err });
    }
    finish(code, reason);
  }

  function send(message: object): boolean {
    try {
      socket?.send(JSON.stringify(message));
      lastSent = clock.now();
      return true;
    } catch (err) {
      close(1011, `cannot send to the hub: ${(err as Error).message}`);
      return false;
    }
  }

  function refill(): void {
    if (welcome === undefined) return;
    const { messagesPerSecond, burst } = welcome.rateLimit;
    const now = clock.now();
    // Stay under the hub's bucket: 90% of its rate, one message of its burst kept back.
    tokens = Math.min(
      Math.max(1, burst - 1),
      tokens + ((now - refilledAt) / 1000) * messagesPerSecond * 0.9,
    );
    refilledAt = now;
  }

  function schedulePump(ms: number): void {
    if (pumpTimer !== undefined) return;
    pumpTimer = timer(Math.max(1, Math.ceil(ms)), () => {
      pumpTimer = undefined;
      pump();
    });
  }

  function tooLarge(m: SequencedMessage, text: string): boolean {
    const max = welcome?.maxMessageBytes ?? Number.POSITIVE_INFINITY;
    const size = Buffer.byteLength(text, "utf8");
    if (size <= max) return false;
    log.warn("a message is too large for the hub; not sent", {
      type: m.type,
      seq: m.seq,
      bytes: size,
      max,
    });
    return true;
  }

  function pump(): void {
    if (finished || welcome === undefined || socket === undefined) return;
    refill();
    for (;;) {
      const m = outbox.nextAfter(cursor);
      if (m === undefined) return;
      if (socket.bufferedAmount() > MAX_BUFFERED) {
        schedulePump(50);
        return;
      }
      if (tokens < 1) {
        schedulePump(((1 - tokens) * 1000) / (welcome.rateLimit.messagesPerSecond * 0.9));
        return;
      }
      const text = JSON.stringify(m);
      cursor = m.seq;
      if (tooLarge(m, text)) continue;
      tokens -= 1;
      try {
        socket.send(text);
        lastSent = clock.now();
      } catch (err) {
        close(1011, `cannot send to the hub: ${(err as Error).message}`);
        return;
      }
    }
  }

  function heartbeat(): void {
    if (finished || welcome === undefined) return;
    const interval = welcome.heartbeatIntervalMs;
    const now = clock.now();
    if (now - lastHeard >= 3 * interval) {
      log.warn("the hub stopped answering; reconnecting", { silentMs: now - lastHeard });
      close(4000, "the hub did not answer for three heartbeat intervals");
      return;
    }
    refill();
    if (now - lastSent >= interval * 0.9 && tokens >= 1) {
      tokens -= 1;
      send({ type: "hb" });
    }
    timer(interval, heartbeat);
  }

  function onWelcome(w: Welcome): void {
    if (welcome !== undefined) {
      close(CLOSE_CODES.protocol, "a second welcome");
      return;
    }
    if (w.protocolVersion !== PROTOCOL_VERSION) {
      close(CLOSE_CODES["unsupported-version"], `hub speaks protocol ${w.protocolVersion}`);
      return;
    }
    welcome = w;
    tokens = Math.max(1, w.rateLimit.burst - 1);
    refilledAt = clock.now();
    cursor = Math.min(w.ackedSeq, outbox.lastSeq);
    deps.onWelcome(w);
    timer(w.heartbeatIntervalMs, heartbeat);
    pump();
  }

  function onDesired(d: DesiredReceived): void {
    let ack: Omit<DesiredAck, "type">;
    try {
      ack = deps.onDesired(d);
    } catch (err) {
      log.error("taking the hub's desired state failed; not acknowledged", { error: err });
      return;
    }
    if (!finished) send({ type: "desired.ack", ...ack });
  }

  function handle(m: HubMessage): void {
    switch (m.type) {
      case "welcome":
        onWelcome(m);
        return;
      case "ack":
        if (m.seq > outbox.lastSeq) {
          log.warn("the hub acknowledged a seq never sent; ignored", {
            seq: m.seq,
            lastSeq: outbox.lastSeq,
          });
          return;
        }
        outbox.ack(m.seq);
        return;
      case "hb":
        return;
      case "desired":
        onDesired({ ok: true, message: m });
        return;
      case "error":
        hubError = m;
        log.warn("the hub refused the connection", { code: m.code, reason: m.reason });
        return;
    }
  }

  function onMessage(data: string | ArrayBuffer | Uint8Array): void {
    if (finished) return;
    lastHeard = clock.now();
    const decoded = decodeHubMessage(data);
    if (!decoded.ok && decoded.type === "desired" && welcome !== undefined) {
      onDesired({ ok: false, reason: decoded.reason, ...generationOf(data) });
      return;
    }
    if (!decoded.ok) {
      log.warn("refused a message from the hub", { code: decoded.code, reason: decoded.reason });
      close(CLOSE_CODES[decoded.code], decoded.reason.slice(0, 120));
      return;
    }
    try {
      handle(decoded.message);
    } catch (err) {
      log.error("handling a message from the hub failed", {
        type: decoded.message.type,
        error: err,
      });
    }
  }

  try {
    socket = deps.dial(
      deps.url,
      { authorization: `Bearer ${deps.credential}` },
      {
        onOpen: () => {
          if (!finished) send({ type: "hello", protocolVersion: PROTOCOL_VERSION, ...deps.hello });
        },
        onMessage,
        onClose: (code, reason) => finish(code, reason || "connection closed"),
      },
    );
  } catch (err) {
    finish(1006, `cannot connect to ${deps.url}: ${(err as Error).message}`);
  }
  timer(deps.welcomeTimeoutMs ?? 10_000, () => {
    if (welcome === undefined) close(4000, "no welcome from the hub in time");
  });

  return {
    done,
    wake: () => pump(),
    close,
    report(ack) {
      if (!finished && welcome !== undefined) send({ type: "desired.ack", ...ack });
    },
    get welcomed() {
      return welcome !== undefined;
    },
  };
}
