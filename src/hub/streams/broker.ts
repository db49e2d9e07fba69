// The stream-multiplexing part of agents' sessions on the hub (docs/protocol.md, "Streams"): a
// stream to a device is opened over that device's connection, its input is sent within the
// credit the agent gives, its output handed to the client, and credit given back once the
// client took it. Data frames go only while little is queued in the agent's socket, so the
// hub's own messages (acks, desired state) wait behind at most STREAM_LOW_WATER bytes. A bad frame or
// message from a device ends that stream only; a device going offline ends all of its streams
// with the reason.
import {
  channelsOf,
  decodeAgentStreamMessage,
  decodeFrame,
  encodeFrame,
  STREAM_DEFAULTS,
  STREAM_LOW_WATER,
  type StreamError,
  type StreamOpen,
} from "../../protocol/index.ts";
import {
  type OpenStream,
  StreamFailure,
  type StreamOutput,
  type StreamWork,
} from "../../streams/types.ts";
import type { Logger } from "../../util/log.ts";

/** Input a client may have sent ahead of the device's credit before its stream is ended. */
const MAX_PENDING_INPUT = 16 * 1024 * 1024;

/** The part of an agent's socket the broker uses. */
export interface BrokerSocket {
  send(data: string | Uint8Array): unknown;
  getBufferedAmount(): number;
}

interface Waiter {
  bytes: number;
  go: () => void;
}

interface HubStream {
  id: number;
  node: string;
  req: StreamOpen;
  out: StreamOutput;
  ready: boolean;
  /** Settles the open: with the work, or the failure. */
  opened: { resolve: (w: StreamWork) => void; reject: (e: StreamFailure) => void };
  /** Bytes we may send the agent. */
  credit: number;
  /** Bytes the agent may still send us. */
  inWindow: number;
  consumed: number;
  /** Input waiting for credit or for the socket. */
  waiting: Waiter[];
  /** Input and its end, in the order the client sent them. */
  chain: Promise<void>;
  pendingInput: number;
  abort: AbortController;
}

/** The streams of one agent connection (kept on the socket's data). */
export interface AgentStreams {
  nextId: number;
  byId: Map<number, HubStream>;
}

export interface BrokerDeps {
  log: Logger;
  /** The socket of `node`'s agent, its streams, and whether it runs streams; undefined when
   * the node is not connected here. */
  connection(
    node: string,
  ): { ws: BrokerSocket; streams: AgentStreams | undefined; agent: string } | undefined;
  windowBytes?: number;
  maxFrameBytes?: number;
  maxStreams?: number;
}

export class StreamBroker {
  readonly windowBytes: number;
  readonly maxFrame: number;
  readonly maxStreams: number;

  constructor(private readonly deps: BrokerDeps) {
    this.windowBytes = deps.windowBytes ?? STREAM_DEFAULTS.windowBytes;
    this.maxFrame = deps.maxFrameBytes ?? STREAM_DEFAULTS.maxFrameBytes;
    this.maxStreams = deps.maxStreams ?? STREAM_DEFAULTS.maxStreams;
  }

  /** The welcome's `streams` settings. */
  settings() {
    return {
      maxStreams: this.maxStreams,
      windowBytes: this.windowBytes,
      maxFrameBytes: this.maxFrame,
    };
  }

  /** Streams open on `node` now. */
  count(node: string): number {
    return this.deps.connection(node)?.streams?.byId.size ?? 0;
  }

  /** An opener of streams to `node` (the stream's id and window are the broker's). */
  opener(node: string): OpenStream {
    return (req, out, signal) => this.open(node, req, out, signal);
  }

  private open(
    node: string,
    req: StreamOpen,
    out: StreamOutput,
    signal: AbortSignal,
  ): Promise<StreamWork> {
    const c = this.deps.connection(node);
    if (c === undefined)
      return Promise.reject(
        new StreamFailure(
          503,
          "ServiceUnavailable",
          `node "${node}" is offline: its agent is not connected to the hub`,
        ),
      );
    if (c.streams === undefined)
      return Promise.reject(
        new StreamFailure(
          503,
          "ServiceUnavailable",
          `the agent of node "${node}" (${c.agent}) cannot stream logs, exec or port-forward: upgrade it`,
        ),
      );
    if (c.streams.byId.size >= this.maxStreams)
      return Promise.reject(
        new StreamFailure(
          429,
          "TooManyRequests",
          `node "${node}" runs ${c.streams.byId.size} streams already (the limit is ${this.maxStreams})`,
        ),
      );
    const id = c.streams.nextId++;
    return new Promise<StreamWork>((resolve, reject) => {
      const s: HubStream = {
        id,
        node,
        req: { ...req, id, window: this.windowBytes },
        out,
        ready: false,
        opened: { resolve, reject },
        credit: 0,
        inWindow: this.windowBytes,
        consumed: 0,
        waiting: [],
        chain: Promise.resolve(),
        pendingInput: 0,
        abort: new AbortController(),
      };
      c.streams?.byId.set(id, s);
      signal.addEventListener("abort", () => this.clientLeft(c.ws, c.streams, s), { once: true });
      c.ws.send(JSON.stringify(s.req));
    });
  }

  private work(ws: BrokerSocket, streams: AgentStreams, s: HubStream): StreamWork {
    const control = (m: object) => {
      if (streams.byId.get(s.id) === s) ws.send(JSON.stringify({ id: s.id, ...m }));
    };
    // Input goes in order, and the end of input only after the input before it.
    const inOrder = (fn: () => Promise<void> | void) => {
      s.chain = s.chain.then(fn, fn);
      return s.chain;
    };
    return {
      input: (channel, data) => {
        s.pendingInput += data.length;
        if (s.pendingInput > MAX_PENDING_INPUT) {
          this.end(ws, streams, s, {
            code: 413,
            reason: "RequestEntityTooLarge",
            message: `the client sent more than ${MAX_PENDING_INPUT} bytes ahead of the device`,
          });
          return Promise.resolve();
        }
        return inOrder(() => this.input(ws, streams, s, channel, data));
      },
      resize: (width, height) => control({ type: "stream.resize", width, height }),
      eof: () => void inOrder(() => control({ type: "stream.eof" })),
    };
  }

  /** Sends client input to the agent within its credit, in frames, as the socket allows. */
  private async input(
    ws: BrokerSocket,
    streams: AgentStreams,
    s: HubStream,
    channel: number,
    data: Uint8Array,
  ): Promise<void> {
    for (let at = 0; at < data.length; ) {
      const n = Math.min(this.maxFrame, data.length - at);
      await this.sendable(ws, s, n);
      if (streams.byId.get(s.id) !== s) return;
      const take = Math.min(n, s.credit);
      if (take === 0) continue;
      s.credit -= take;
      ws.send(encodeFrame(s.id, channel, data.subarray(at, at + take)));
      at += take;
      s.pendingInput -= take;
    }
  }

  /** Resolves when `s` has some credit and the socket is below its low water. */
  private sendable(ws: BrokerSocket, s: HubStream, _bytes: number): Promise<void> {
    if (s.credit > 0 && ws.getBufferedAmount() < STREAM_LOW_WATER && s.waiting.length === 0)
      return Promise.resolve();
    return new Promise((go) => s.waiting.push({ bytes: _bytes, go }));
  }

  /** Lets waiting input go on (credit arrived, or the socket drained). */
  private wake(ws: BrokerSocket, s: HubStream): void {
    while (s.waiting.length > 0 && s.credit > 0 && ws.getBufferedAmount() < STREAM_LOW_WATER)
      s.waiting.shift()?.go();
  }

  /** The agent's socket drained: streams waiting on it go on. */
  drained(ws: BrokerSocket, streams: AgentStreams | undefined): void {
    for (const s of streams?.byId.values() ?? []) this.wake(ws, s);
  }

  /** A stream message from the agent (already known to be `stream.*`). */
  agentText(ws: BrokerSocket, streams: AgentStreams, value: Record<string, unknown>): void {
    const d = decodeAgentStreamMessage(value);
    if (!d.ok) {
      this.deps.log.warn("refused a stream message from a device", { reason: d.reason });
      const s = d.id === undefined ? undefined : streams.byId.get(d.id);
      if (s !== undefined) this.badInput(ws, streams, s, d.reason);
      return;
    }
    const m = d.message;
    const s = streams.byId.get(m.id);
    if (s === undefined) return;
    if (m.type === "stream.ready") {
      if (s.ready) {
        this.badInput(ws, streams, s, "a second stream.ready");
        return;
      }
      s.ready = true;
      s.credit = m.window;
      s.opened.resolve(this.work(ws, streams, s));
    } else if (m.type === "stream.window") {
      s.credit += m.bytes;
      this.wake(ws, s);
    } else {
      streams.byId.delete(s.id);
      s.abort.abort();
      this.finish(s, {
        ...(m.exitCode !== undefined && { exitCode: m.exitCode }),
        ...(m.error !== undefined && { error: m.error }),
      });
    }
  }

  /** A data frame from the agent. */
  agentBinary(ws: BrokerSocket, streams: AgentStreams, data: Uint8Array): void {
    const f = decodeFrame(data, this.maxFrame);
    if (!f.ok) {
      const s = f.id === undefined ? undefined : streams.byId.get(f.id);
      if (s !== undefined) this.badInput(ws, streams, s, f.reason);
      else this.deps.log.warn("dropped a bad data frame from a device", { reason: f.reason });
      return;
    }
    const s = streams.byId.get(f.id);
    if (s === undefined) return;
    if (!s.ready) {
      this.badInput(ws, streams, s, "data before stream.ready");
      return;
    }
    if (!channelsOf(s.req.kind).fromAgent.includes(f.channel)) {
      this.badInput(
        ws,
        streams,
        s,
        `channel ${f.channel} carries nothing from a ${s.req.kind} stream`,
      );
      return;
    }
    if (f.payload.length > s.inWindow) {
      this.badInput(
        ws,
        streams,
        s,
        `the device sent ${f.payload.length} bytes with ${s.inWindow} of credit left`,
      );
      return;
    }
    s.inWindow -= f.payload.length;
    const n = f.payload.length;
    s.out.write(f.channel, f.payload).then(() => this.giveBack(ws, streams, s, n));
  }

  private giveBack(ws: BrokerSocket, streams: AgentStreams, s: HubStream, bytes: number): void {
    if (streams.byId.get(s.id) !== s) return;
    s.consumed += bytes;
    if (s.consumed < this.windowBytes / 4 && s.inWindow > 0) return;
    s.inWindow += s.consumed;
    ws.send(JSON.stringify({ type: "stream.window", id: s.id, bytes: s.consumed }));
    s.consumed = 0;
  }

  /** The device sent something wrong for stream `s`: end it, and tell both ends why. */
  private badInput(ws: BrokerSocket, streams: AgentStreams, s: HubStream, reason: string): void {
    this.deps.log.warn("ended a stream on bad input from its device", {
      node: s.node,
      stream: s.id,
      reason,
    });
    this.end(ws, streams, s, {
      code: 502,
      reason: "BadGateway",
      message: `the device sent a bad stream frame: ${reason}`,
    });
  }

  /** Ends `s` from the hub's side: the agent is told, the client gets `error`. */
  private end(ws: BrokerSocket, streams: AgentStreams, s: HubStream, error: StreamError): void {
    if (streams.byId.get(s.id) !== s) return;
    streams.byId.delete(s.id);
    s.abort.abort();
    ws.send(JSON.stringify({ type: "stream.close", id: s.id, error }));
    this.finish(s, { error });
  }

  private clientLeft(ws: BrokerSocket, streams: AgentStreams | undefined, s: HubStream): void {
    if (streams?.byId.get(s.id) !== s) return;
    streams.byId.delete(s.id);
    s.abort.abort();
    ws.send(JSON.stringify({ type: "stream.close", id: s.id }));
    for (const w of s.waiting.splice(0)) w.go();
    if (!s.ready) s.opened.reject(new StreamFailure(499, "ClientClosedRequest", "the client left"));
  }

  /** The agent's connection closed: every stream of it ends with `why`. */
  connectionClosed(streams: AgentStreams | undefined, why: string): void {
    for (const s of streams?.byId.values() ?? []) {
      s.abort.abort();
      this.finish(s, { error: { code: 503, reason: "ServiceUnavailable", message: why } });
    }
    streams?.byId.clear();
  }

  private finish(s: HubStream, result: { exitCode?: number; error?: StreamError }): void {
    for (const w of s.waiting.splice(0)) w.go();
    if (!s.ready) {
      const e = result.error ?? {
        code: 500,
        reason: "InternalError",
        message: "the device ended the stream before it started",
      };
      s.opened.reject(new StreamFailure(e.code, e.reason, e.message));
      return;
    }
    s.out.end(result);
  }
}
