// One session with the hub, from dial to close (docs/protocol.md, "The connection"): sends hello,
// waits for welcome, then lets the outbox pump send what the hub has not stored, applies acks,
// answers desired with the desired.ack its handler returns, sends heartbeats and gives up on a
// hub silent for three heartbeat intervals. It is made of named parts, each tested alone:
// the connection (connection.ts), message routing (router.ts), the outbox pump (pump.ts) and,
// when the agent runs streams, stream multiplexing (streams/mux.ts). Nothing here throws to the
// caller, and nothing here touches pods.

import type { DeviceHealth } from "../../protocol/health.ts";
import {
  CLOSE_CODES,
  type DesiredAck,
  type Hello,
  PROTOCOL_VERSION,
  type Welcome,
} from "../../protocol/index.ts";
import type { UpdateMessage, UpdateStatus } from "../../protocol/update.ts";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import type { SessionExtension } from "../streams/mux.ts";
import { Connection, type SessionResult } from "./connection.ts";
import type { Outbox } from "./outbox.ts";
import { OutboxPump } from "./pump.ts";
import { CredentialRenewal } from "./rotation.ts";
import { type DesiredReceived, type HubMessageHandlers, routeHubFrame } from "./router.ts";
import type { Dial } from "./socket.ts";

export type { SessionResult } from "./connection.ts";
export type { DesiredReceived } from "./router.ts";

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
  /** Builds the streams part on the session's connection (absent: no streams). */
  extension?: (conn: Connection) => SessionExtension;
  /** Saves a rotated node credential (rotation.ts); absent: the session never asks for one. */
  saveCredential?: (credential: string) => void;
  /** Takes an update the hub offers (absent: the agent did not announce "updates"). */
  onUpdate?: (offer: UpdateMessage) => void;
}

export interface Session {
  readonly done: Promise<SessionResult>;
  /** The outbox has new entries: send them when the rate limit allows. */
  wake(): void;
  /** Closes the connection (agent stopping). */
  close(code: number, reason: string): void;
  /** Sends a desired.ack report now, if welcomed (its state changed). */
  report(ack: Omit<DesiredAck, "type">): void;
  /** Sends a health report now, if welcomed; whether it was sent. */
  sendHealth(health: DeviceHealth): boolean;
  /** Sends an update.status now, if welcomed; whether it was sent. */
  sendUpdateStatus(status: Omit<UpdateStatus, "type">): boolean;
  readonly welcomed: boolean;
}

/** The round trip of hello → welcome and of hb → hb, on the monotonic clock: sent in the next hb
 * for the hub's clock skew (docs/protocol.md, "Clock skew"). One probe is timed at a time. */
class RoundTrip {
  /** When the timed message was sent (monotonic ms), while its answer is awaited. */
  private sentAt: number | undefined;
  /** The last round trip measured (ms). */
  last: number | undefined;

  constructor(private readonly clock: Clock) {}

  sent(): void {
    this.sentAt ??= this.clock.monotonic();
  }

  answered(): void {
    if (this.sentAt === undefined) return;
    this.last = Math.min(3_600_000, Math.round(this.clock.monotonic() - this.sentAt));
    this.sentAt = undefined;
  }
}

/** Heartbeats after welcome: one when nothing was sent, or nothing heard, for 90% of the
 * interval (paid from the pump's rate budget), with the agent's wall clock and the last round
 * trip; a hub silent for three intervals ends the session. The hub answers a heartbeat at once,
 * so a live hub that acknowledges nothing for a while (its store cannot write) is not taken for a
 * dead one while the agent keeps reporting. Silence is measured on the monotonic clock. */
function startHeartbeat(
  conn: Connection,
  pump: OutboxPump,
  intervalMs: number,
  deps: { clock: Clock; log: Logger; rtt: RoundTrip },
): void {
  const { clock, log, rtt } = deps;
  const beat = () => {
    const now = clock.monotonic();
    if (now - conn.lastHeard >= 3 * intervalMs) {
      log.warn("the hub stopped answering; reconnecting", { silentMs: now - conn.lastHeard });
      conn.close(4000, "the hub did not answer for three heartbeat intervals");
      return;
    }
    const quiet = Math.max(now - conn.lastSent, now - conn.lastHeard) >= intervalMs * 0.9;
    if (quiet && pump.take()) {
      const hb = {
        type: "hb",
        clock: Math.max(0, Math.round(clock.now())),
        ...(rtt.last !== undefined && { rttMs: rtt.last }),
      };
      if (conn.sendJson(hb)) rtt.sent();
    }
    conn.setTimer(intervalMs, beat);
  };
  conn.setTimer(intervalMs, beat);
}

/** What the session does with each message of the hub (the routing part's handlers). */
function sessionHandlers(
  deps: SessionDeps,
  conn: Connection,
  pump: OutboxPump,
  extension: SessionExtension | undefined,
  rtt: RoundTrip,
  renewal: CredentialRenewal | undefined,
): HubMessageHandlers {
  const log = deps.logger;
  return {
    welcome(w) {
      rtt.answered();
      if (conn.welcomed) {
        conn.close(CLOSE_CODES.protocol, "a second welcome");
        return;
      }
      if (w.protocolVersion !== PROTOCOL_VERSION) {
        conn.close(CLOSE_CODES["unsupported-version"], `hub speaks protocol ${w.protocolVersion}`);
        return;
      }
      conn.welcomed = true;
      deps.onWelcome(w);
      extension?.welcomed(w);
      startHeartbeat(conn, pump, w.heartbeatIntervalMs, { clock: deps.clock, log, rtt });
      pump.start(w);
      renewal?.welcomed(w);
    },
    ack(seq) {
      if (seq > deps.outbox.lastSeq) {
        log.warn("the hub acknowledged a seq never sent; ignored", {
          seq,
          lastSeq: deps.outbox.lastSeq,
        });
        return;
      }
      deps.outbox.ack(seq);
    },
    desired(d) {
      let ack: Omit<DesiredAck, "type">;
      try {
        ack = deps.onDesired(d);
      } catch (err) {
        log.error("taking the hub's desired state failed; not acknowledged", { error: err });
        return;
      }
      conn.sendJson({ type: "desired.ack", ...ack });
    },
    error(e) {
      conn.hubError = e;
      log.warn("the hub refused the connection", { code: e.code, reason: e.reason });
    },
    other(m) {
      if (m.type === "credential" && conn.welcomed) renewal?.received(m);
      if (m.type === "hb") rtt.answered();
      if (m.type === "update" && conn.welcomed) deps.onUpdate?.(m);
    },
    ...(extension !== undefined && { extension }),
    refuse: (code, reason) => conn.close(code, reason),
  };
}

export function startSession(deps: SessionDeps): Session {
  let extension: SessionExtension | undefined;
  let handlers: HubMessageHandlers | undefined;
  const rtt = new RoundTrip(deps.clock);
  const conn = new Connection({
    clock: deps.clock,
    logger: deps.logger,
    dial: deps.dial,
    url: deps.url,
    credential: deps.credential,
    onOpen: () => {
      const clock = Math.max(0, Math.round(deps.clock.now()));
      if (conn.sendJson({ type: "hello", protocolVersion: PROTOCOL_VERSION, ...deps.hello, clock }))
        rtt.sent();
    },
    onFrame: (data) => {
      if (handlers !== undefined) routeHubFrame(data, conn.welcomed, handlers, deps.logger);
    },
    onEnd: () => extension?.ended(),
  });
  const pump = new OutboxPump(conn, deps.outbox, deps.clock, deps.logger);
  extension = deps.extension?.(conn);
  const save = deps.saveCredential;
  const renewal =
    save === undefined
      ? undefined
      : new CredentialRenewal({ conn, clock: deps.clock, log: deps.logger, save });
  handlers = sessionHandlers(deps, conn, pump, extension, rtt, renewal);
  conn.setTimer(deps.welcomeTimeoutMs ?? 10_000, () => {
    if (!conn.welcomed) conn.close(4000, "no welcome from the hub in time");
  });
  return {
    done: conn.done,
    wake: () => pump.pump(),
    close: (code, reason) => conn.close(code, reason),
    report(ack) {
      if (conn.welcomed) conn.sendJson({ type: "desired.ack", ...ack });
    },
    sendHealth(health) {
      return conn.welcomed && conn.sendJson({ type: "health", health });
    },
    sendUpdateStatus(status) {
      return conn.welcomed && conn.sendJson({ type: "update.status", ...status });
    },
    get welcomed() {
      return conn.welcomed;
    },
  };
}
