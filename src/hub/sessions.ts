// The connection part of agents' sessions on the hub (docs/protocol.md, "The connection"):
// authenticate, expect hello within a time, welcome, replace an older connection of the same
// node, rate-limit and decode each message, hand it to the routing part (agent-router.ts) or to
// the streams part, and close with `error` and the code of what it cannot accept; other
// connections are untouched. Acks are sent by the flusher (flusher.ts).

import {
  AGENT_FEATURES,
  type AgentMessage,
  CLOSE_CODES,
  decodeAgentMessage,
  type ErrorCode,
  type Hello,
  PROTOCOL_VERSION,
  SUPPORTED_PROTOCOL_VERSIONS,
  type Welcome,
} from "../protocol/index.ts";
import { isStreamType } from "../protocol/streams.ts";
import type { Clock } from "../util/clock.ts";
import type { Logger } from "../util/log.ts";
import { clockSkew, type Refusal, routeAgentMessage } from "./agent-router.ts";
import type { Fleet } from "./fleet.ts";
import type { Identity } from "./identity.ts";
import { type RateLimit, TokenBucket } from "./ratelimit.ts";
import type { SocketHandler } from "./server.ts";
import type { AgentStreams, StreamBroker } from "./streams/broker.ts";
import type { NodeUpdates } from "./updates/updates.ts";

/** The state of one agent connection. */
export interface AgentSocketData {
  kind: "agent";
  /** The credential's node, or why the credential was refused (sent on open). */
  auth: ReturnType<Identity["authenticate"]>;
  /** Set once hello was accepted. */
  nodeName?: string;
  bucket: TokenBucket;
  cancelHelloTimer?: () => void;
  closed: boolean;
  /** Over TLS or from a loopback address: Secrets may be sent (docs/protocol.md). */
  secure: boolean;
  /** The agent announced that it runs the pods of its desired state. */
  runsDesired?: boolean;
  /** The agent's version, from its hello. */
  agentVersion?: string;
  /** Its open streams, when it announced "streams" (docs/protocol.md, "Streams"). */
  streams?: AgentStreams;
}

/** The part of a server WebSocket sessions use. */
export interface AgentSocket {
  data: AgentSocketData;
  send(data: string | Uint8Array): unknown;
  close(code?: number, reason?: string): void;
  getBufferedAmount?(): number;
}

export interface SessionOptions {
  fleet: Fleet;
  identity: Identity;
  clock: Clock;
  log: Logger;
  heartbeatIntervalMs: number;
  maxMessageBytes: number;
  rateLimit: RateLimit;
  helloTimeoutMs: number;
  /** Marks `node` as having received messages to acknowledge at the next flush. */
  markDirty(node: string): void;
  /** Flushes the store now (before resuming a stream whose seqs are not all stored). */
  flushNow(): void;
  /**
   * The `desired` message to send `node` now, or undefined for none. `agentGeneration` is the
   * generation of the agent's hello (undefined: the node's desired state just changed).
   */
  desiredFor?(
    node: string,
    agentGeneration: number | undefined,
    secure: boolean,
  ): string | undefined;
  /** The agent of `node` reported on its desired state. */
  onDesiredAck?(node: string): void;
  /** Streams to the agents that run them (absent: the hub opens none). */
  broker?: StreamBroker;
  /** Told when the agent of `node` is welcomed here (true) and when its connection here ends
   * (false): the replica serves the node's streams to the others meanwhile (relay/replica.ts). */
  holding?(node: string, here: boolean): void;
  /** Agent updates: told of each hello and update.status, asked for the offer to send. */
  updates?: Pick<NodeUpdates, "hello" | "offer" | "report">;
}

export class AgentSessions {
  private readonly byNode = new Map<string, AgentSocket>();

  constructor(private readonly opts: SessionOptions) {}

  newData(credential: string | undefined, secure = false): AgentSocketData {
    return {
      kind: "agent",
      auth: this.opts.identity.authenticate(credential, this.opts.clock.now()),
      bucket: new TokenBucket(this.opts.rateLimit, this.opts.clock.now()),
      closed: false,
      secure,
    };
  }

  /** Sends `node` its desired state if it is connected here and runs it (a bus message). */
  desiredChanged(node: string): void {
    const ws = this.byNode.get(node);
    if (ws === undefined || ws.data.runsDesired !== true) return;
    const text = this.opts.desiredFor?.(node, undefined, ws.data.secure);
    if (text !== undefined) ws.send(text);
  }

  /** Offers `node` its wanted release if it is connected here (the operator changed it). */
  updateChanged(node: string): void {
    const ws = this.byNode.get(node);
    if (ws !== undefined) this.offerUpdate(ws, node);
  }

  /** Sends the agent of `ws` its update offer once known, if there is one and it is still here. */
  private offerUpdate(ws: AgentSocket, node: string, unlessOffered = false): void {
    this.opts.updates?.offer(node, unlessOffered).then(
      (msg) => {
        if (msg !== undefined && !ws.data.closed && this.byNode.get(node) === ws)
          ws.send(JSON.stringify(msg));
      },
      (err) => this.opts.log.warn("cannot offer an update", { node, error: String(err) }),
    );
  }

  /** How many agents are connected and past hello. */
  count(): number {
    return this.byNode.size;
  }

  open(ws: AgentSocket): void {
    const auth = ws.data.auth;
    if (!auth.ok) {
      this.refuse(ws, auth.code, auth.reason);
      return;
    }
    ws.data.cancelHelloTimer = this.opts.clock.setTimer(this.opts.helloTimeoutMs, () => {
      if (ws.data.nodeName === undefined && !ws.data.closed)
        this.refuse(ws, "protocol", `no hello within ${this.opts.helloTimeoutMs} ms`);
    });
  }

  message(ws: AgentSocket, data: string | Uint8Array | ArrayBufferLike): void {
    if (ws.data.closed) return;
    if (this.streamMessage(ws, data)) return;
    const refusal = this.handle(ws, data, this.opts.clock.now());
    if (refusal !== undefined) this.refuse(ws, refusal.code, refusal.reason);
  }

  /** Hands a stream message or data frame of a streaming agent to the broker; false when
   * `data` is not one (stream messages are outside the rate limit: their credit bounds them). */
  private streamMessage(ws: AgentSocket, data: string | Uint8Array | ArrayBufferLike): boolean {
    const streams = ws.data.streams;
    const broker = this.opts.broker;
    if (streams === undefined || broker === undefined || ws.data.nodeName === undefined)
      return false;
    const sock = {
      send: (d: string | Uint8Array) => ws.send(d),
      getBufferedAmount: () => ws.getBufferedAmount?.() ?? 0,
    };
    if (typeof data !== "string") {
      if (data.byteLength > this.opts.maxMessageBytes) return false;
      broker.agentBinary(sock, streams, data instanceof Uint8Array ? data : new Uint8Array(data));
      return true;
    }
    if (!data.includes('"stream.')) return false;
    let value: unknown;
    try {
      value = JSON.parse(data);
    } catch {
      return false;
    }
    const type = (value as { type?: unknown } | null)?.type;
    if (typeof type !== "string" || !isStreamType(type)) return false;
    this.opts.fleet.touch(ws.data.nodeName, this.opts.clock.now());
    broker.agentText(sock, streams, value as Record<string, unknown>);
    return true;
  }

  /** The socket of node `name`'s agent, for the broker. */
  connection(name: string) {
    const ws = this.byNode.get(name);
    if (ws === undefined) return undefined;
    return {
      ws: {
        send: (d: string | Uint8Array) => ws.send(d),
        getBufferedAmount: () => ws.getBufferedAmount?.() ?? 0,
      },
      streams: ws.data.streams,
      agent: `fleetlet agent ${ws.data.agentVersion ?? "of an unknown version"}`,
    };
  }

  /** The agent's socket drained: streams waiting on it go on. */
  drained(ws: AgentSocket): void {
    this.opts.broker?.drained(
      { send: (d) => ws.send(d), getBufferedAmount: () => ws.getBufferedAmount?.() ?? 0 },
      ws.data.streams,
    );
  }

  /** Handles one frame; returns why the connection must be closed, if it must. */
  private handle(
    ws: AgentSocket,
    data: string | Uint8Array | ArrayBufferLike,
    now: number,
  ): Refusal | undefined {
    if (!ws.data.bucket.take(now)) {
      const { messagesPerSecond, burst } = this.opts.rateLimit;
      return {
        code: "rate-limited",
        reason: `more than ${messagesPerSecond} messages/s (burst ${burst})`,
      };
    }
    const decoded = decodeAgentMessage(data, this.opts.maxMessageBytes);
    if (!decoded.ok) return decoded;
    const name = ws.data.nodeName;
    if (name === undefined) return this.hello(ws, decoded.message, now);
    return this.apply(ws, name, decoded.message, now);
  }

  private apply(
    ws: AgentSocket,
    name: string,
    msg: AgentMessage,
    now: number,
  ): Refusal | undefined {
    if (msg.type === "credential.request" || msg.type === "credential.saved") {
      this.credentialMessage(ws, name, msg.type, now);
      return undefined;
    }
    return routeAgentMessage(name, msg, now, (text) => ws.send(text), {
      fleet: this.opts.fleet,
      markDirty: (node) => this.opts.markDirty(node),
      ...(this.opts.onDesiredAck !== undefined && { onDesiredAck: this.opts.onDesiredAck }),
      onUpdateStatus: (node, status) => this.opts.updates?.report(node, status),
      onNodeReport: () => this.offerUpdate(ws, name, true),
    });
  }

  /** Rotation over the connection (docs/protocol.md, "Rotating the node credential"): a new
   * credential, stored as pending before it is sent (a failed write sends nothing); or the agent
   * saved it. */
  private credentialMessage(
    ws: AgentSocket,
    name: string,
    type: "credential.request" | "credential.saved",
    now: number,
  ): void {
    const { identity, fleet, log } = this.opts;
    fleet.touch(name, now);
    if (type === "credential.saved") {
      identity.credentialSaved(name);
      this.opts.flushNow();
      log.info("node credential rotated", { node: name });
      return;
    }
    identity.renewCredential(name, now).then(
      (renewed) => {
        ws.send(JSON.stringify({ type: "credential", ...renewed }));
        log.info("sent a new node credential", { node: name, expiresAt: renewed.expiresAt });
      },
      (err) =>
        log.error("could not store a new node credential; the agent asks again", {
          node: name,
          error: err,
        }),
    );
  }

  private hello(ws: AgentSocket, msg: AgentMessage, now: number): Refusal | undefined {
    if (msg.type !== "hello")
      return { code: "protocol", reason: `the first message must be hello, got ${msg.type}` };
    const auth = ws.data.auth;
    if (!auth.ok) return auth;
    if (!SUPPORTED_PROTOCOL_VERSIONS.includes(msg.protocolVersion)) {
      const spoken = SUPPORTED_PROTOCOL_VERSIONS.join(", ");
      return {
        code: "unsupported-version",
        reason: `protocol version ${msg.protocolVersion} is not supported; this hub speaks ${spoken}`,
      };
    }
    if (msg.nodeName !== auth.nodeName)
      return {
        code: "forbidden",
        reason: `credential of node "${auth.nodeName}" cannot speak for node "${msg.nodeName}"`,
      };
    this.accept(ws, auth.nodeName, msg, now);
    return undefined;
  }

  private accept(ws: AgentSocket, name: string, msg: Hello, now: number): void {
    ws.data.cancelHelloTimer?.();
    const previous = this.byNode.get(name);
    if (previous !== undefined && previous !== ws) {
      this.byNode.delete(name);
      this.refuse(previous, "replaced", `node "${name}" connected again`);
    }
    const { fleet } = this.opts;
    if (fleet.receivedSeq(name) > (fleet.nodes.get(name)?.ackedSeq ?? 0)) this.opts.flushNow();
    ws.data.nodeName = name;
    this.byNode.set(name, ws);
    this.opts.holding?.(name, true);
    const ackedSeq = fleet.connect(name, msg, now);
    if (msg.clock !== undefined) fleet.setClockSkew(name, clockSkew(msg.clock, now));
    ws.data.agentVersion = msg.agentVersion;
    const streams =
      this.opts.broker !== undefined && msg.features?.includes(AGENT_FEATURES.streams) === true;
    if (streams) ws.data.streams = { nextId: 1, byId: new Map() };
    const welcome: Welcome = {
      type: "welcome",
      protocolVersion: PROTOCOL_VERSION,
      heartbeatIntervalMs: this.opts.heartbeatIntervalMs,
      ackedSeq,
      maxMessageBytes: this.opts.maxMessageBytes,
      rateLimit: this.opts.rateLimit,
      ...(streams && this.opts.broker !== undefined && { streams: this.opts.broker.settings() }),
    };
    const credential = this.opts.identity.credentialTimes(name, now);
    if (credential !== undefined) welcome.credential = credential;
    ws.send(JSON.stringify(welcome));
    ws.data.runsDesired = msg.features?.includes(AGENT_FEATURES.desiredPods) === true;
    if (ws.data.runsDesired) {
      const desired = this.opts.desiredFor?.(name, msg.desiredGeneration ?? 0, ws.data.secure);
      if (desired !== undefined) ws.send(desired);
    }
    this.opts.updates?.hello(name, msg.agentVersion, msg.features);
    this.offerUpdate(ws, name);
    this.opts.log.debug("agent connected", {
      node: name,
      ackedSeq,
      agentVersion: msg.agentVersion,
    });
  }

  /** Sends `ack` to the connection of `name`, if any. */
  ack(name: string, seq: number): void {
    if (seq > 0) this.byNode.get(name)?.send(`{"type":"ack","seq":${seq}}`);
  }

  /** Closes the connections whose node credential expired at `now` (an agent that did not
   * rotate it); the liveness loop calls this. */
  closeExpired(now: number): void {
    for (const [name, ws] of [...this.byNode]) {
      const reason = this.opts.identity.expiredReason(name, now);
      if (reason !== undefined) this.refuse(ws, "unauthorized", reason);
    }
  }

  /** Closes the connection of a node that was just revoked. */
  revoked(name: string): void {
    const ws = this.byNode.get(name);
    if (ws !== undefined) this.refuse(ws, "revoked", `node "${name}" was revoked`);
  }

  /** The connection closed (by either side). */
  close(ws: AgentSocket): void {
    ws.data.closed = true;
    ws.data.cancelHelloTimer?.();
    const name = ws.data.nodeName;
    this.opts.broker?.connectionClosed(
      ws.data.streams,
      `node "${name}" went offline: its agent's connection to the hub closed`,
    );
    if (name === undefined || this.byNode.get(name) !== ws) return;
    this.byNode.delete(name);
    this.opts.holding?.(name, false);
    this.opts.fleet.setOffline(name, this.opts.clock.now());
  }

  /** Closes every agent connection (the hub stops). */
  closeAll(): void {
    for (const ws of [...this.byNode.values()])
      this.refuse(ws, "shutting-down", "the hub is stopping");
  }

  private refuse(ws: AgentSocket, code: ErrorCode, reason: string): void {
    if (ws.data.closed) return;
    ws.data.closed = true;
    ws.data.cancelHelloTimer?.();
    const name = ws.data.nodeName ?? (ws.data.auth.ok ? ws.data.auth.nodeName : undefined);
    this.opts.log.info("agent connection refused", { node: name, code, reason });
    try {
      ws.send(JSON.stringify({ type: "error", code, reason }));
      ws.close(CLOSE_CODES[code], truncate(reason, 120));
    } catch {
      // The socket is already gone: nothing to tell.
    }
    this.opts.broker?.connectionClosed(ws.data.streams, reason);
    if (ws.data.nodeName !== undefined && this.byNode.get(ws.data.nodeName) === ws) {
      this.byNode.delete(ws.data.nodeName);
      this.opts.holding?.(ws.data.nodeName, false);
      this.opts.fleet.setOffline(ws.data.nodeName, this.opts.clock.now());
    }
  }
}

function truncate(s: string, bytes: number): string {
  const b = Buffer.from(s);
  return b.byteLength <= bytes ? s : `${b.subarray(0, bytes - 3).toString()}...`;
}

/** The socket events of agents' connections, for the server. */
export function agentSockets(sessions: AgentSessions): SocketHandler {
  return {
    open: (ws) => sessions.open(ws as unknown as AgentSocket),
    message: (ws, m) => sessions.message(ws as unknown as AgentSocket, m),
    close: (ws) => sessions.close(ws as unknown as AgentSocket),
    drain: (ws) => sessions.drained(ws as unknown as AgentSocket),
  };
}
