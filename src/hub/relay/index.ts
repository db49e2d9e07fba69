// Streams (logs, exec, attach, port-forward) relayed between hub replicas through NATS
// (docs/hub-replicas.md, "Streams across replicas"). The replica that holds a device serves
// `fleet.open.<name>` with the OpenStream it has for that device (its broker's opener); any
// replica gets an OpenStream for a node held elsewhere from opener(). Both are the shape of
// src/streams/types.ts, so the hub's log, exec and port-forward routes take either.
//
// Invariants:
// - An open is one request: the holder opens the work, then answers accepted (with the stream's
//   id and its credit for input) or refused (with the StreamFailure's status, reason and message).
// - A stream ends on either side's end, on a failure, or when either side hears nothing for
//   silenceMs; either way both sides drop its subscriptions and timers (link.ts).
// - What comes from the bus is checked (codec.ts); what is malformed is dropped and counted.
import { randomBytes } from "node:crypto";
import { type NatsConnection, RequestError } from "@nats-io/transport-node";
import { channelsOf, type StreamOpen } from "../../protocol/index.ts";
import { type OpenStream, StreamFailure, type StreamWork } from "../../streams/types.ts";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import {
  askSubject,
  decodeAsk,
  decodeAskAnswer,
  decodeOpenAnswer,
  decodeOpenRequest,
  encodeAsk,
  encodeAskAnswer,
  encodeOpenAnswer,
  encodeOpenRequest,
  type NodeQuestion,
  openSubject,
  streamSubject,
} from "./codec.ts";
import { Link, type LinkTimings, type RelayCounters } from "./link.ts";

export interface StreamRelayOptions {
  /** The replica's connection to NATS (shared with its bus). */
  nc: NatsConnection;
  clock: Clock;
  log: Logger;
  /** The reader's grant (default 1 MiB). */
  grantBytes?: number;
  /** A ping after this long without sending (default 5 s). */
  keepaliveMs?: number;
  /** A stream fails after this long without a word from the other replica (default 20 s). */
  silenceMs?: number;
  /** How long the holder has to answer an open (default 10 s). */
  openTimeoutMs?: number;
}

interface StreamRelayStats extends RelayCounters {
  /** Streams accepted by this replica as holder, and opened through it as requester. */
  served: number;
  opened: number;
  /** Opens this replica refused as holder. */
  refused: number;
}

export interface StreamRelay {
  /** Streams to `node` through whichever replica serves it. */
  opener(node: string): OpenStream;
  /** Serves streams to `node` with `open` (the holder's), and the other replicas' questions
   * about it with `answer` when given; returns the way to stop serving (streams open go on).
   * Each open reaches one of the replicas serving a node. */
  serve(node: string, open: OpenStream, answer?: (q: NodeQuestion) => unknown): () => void;
  /** Asks the replica holding `node`: its answer, or undefined when no replica holds it (fails
   * as an open does otherwise). */
  ask(node: string, q: NodeQuestion): Promise<unknown>;
  stats(): StreamRelayStats;
}

export function createStreamRelay(opts: StreamRelayOptions): StreamRelay {
  return new Relay(opts);
}

const refusal = (code: number, reason: string, message: string) =>
  encodeOpenAnswer({ ok: false, error: { code, reason, message } });

class Relay implements StreamRelay {
  private readonly counts: StreamRelayStats = {
    malformed: 0,
    subscriptions: 0,
    timers: 0,
    served: 0,
    opened: 0,
    refused: 0,
  };
  private readonly timings: LinkTimings;
  private readonly log: Logger;

  constructor(private readonly o: StreamRelayOptions) {
    this.log = o.log.with({ component: "relay" });
    this.timings = {
      grantBytes: o.grantBytes ?? 1024 * 1024,
      keepaliveMs: o.keepaliveMs ?? 5_000,
      silenceMs: o.silenceMs ?? 20_000,
    };
  }

  stats(): StreamRelayStats {
    return { ...this.counts };
  }

  private link(tx: string, rx: string, peerListening: boolean, who: string): Link {
    const { nc, clock } = this.o;
    const log = this.log;
    return new Link({
      ...this.timings,
      nc,
      clock,
      log,
      counters: this.counts,
      tx,
      rx,
      peerListening,
      who,
    });
  }

  serve(node: string, open: OpenStream, answer?: (q: NodeQuestion) => unknown): () => void {
    const asks = answer === undefined ? undefined : this.answer(node, answer);
    // One queue group: should two replicas serve a node at once (an agent that moved while its
    // old connection is not yet closed), an open reaches one of them, so its work runs once.
    const sub = this.o.nc.subscribe(openSubject(node), {
      queue: "holders",
      callback: (err, msg) => {
        if (err !== null) return;
        void this.accept(node, open, msg.data).then((answer) => {
          try {
            msg.respond(answer);
          } catch (e) {
            this.log.warn("cannot answer a stream open", { node, error: e as Error });
          }
        });
      },
    });
    return () => {
      sub.unsubscribe();
      asks?.unsubscribe();
    };
  }

  /** Answers the questions about `node` with `answer`. */
  private answer(node: string, answer: (q: NodeQuestion) => unknown) {
    return this.o.nc.subscribe(askSubject(node), {
      queue: "holders",
      callback: (err, msg) => {
        if (err !== null) return;
        const q = decodeAsk(msg.data);
        if (!q.ok) this.counts.malformed++;
        const text = q.ok
          ? encodeAskAnswer({ ok: true, value: answer(q.value) })
          : encodeAskAnswer({
              ok: false,
              error: { code: 400, reason: "BadRequest", message: `a malformed ask: ${q.reason}` },
            });
        try {
          msg.respond(text);
        } catch (e) {
          this.log.warn("cannot answer an ask", { node, error: e as Error });
        }
      },
    });
  }

  async ask(node: string, q: NodeQuestion): Promise<unknown> {
    let data: Uint8Array;
    try {
      data = await this.requestOf(node, askSubject(node), encodeAsk(q));
    } catch (err) {
      // requestOf fails with 503 only when no replica serves the node.
      if (err instanceof StreamFailure && err.code === 503) return undefined;
      throw err;
    }
    const a = decodeAskAnswer(data);
    if (!a.ok) {
      this.counts.malformed++;
      throw new StreamFailure(
        502,
        "BadGateway",
        `the hub replica holding node "${node}" answered a malformed ask: ${a.reason}`,
      );
    }
    if (!a.value.ok) {
      const e = a.value.error;
      throw new StreamFailure(e.code, e.reason, e.message);
    }
    return a.value.value;
  }

  /** Opens the work of a request for `node`; the answer to send. */
  private async accept(node: string, open: OpenStream, data: Uint8Array): Promise<string> {
    const d = decodeOpenRequest(data);
    if (!d.ok) {
      this.counts.malformed++;
      this.counts.refused++;
      this.log.warn("refused a malformed stream open", { node, reason: d.reason });
      return refusal(400, "BadRequest", `a malformed stream open: ${d.reason}`);
    }
    const id = randomBytes(16).toString("hex");
    const link = this.link(
      streamSubject(id, "out"),
      streamSubject(id, "in"),
      false,
      `that asked for stream ${id}`,
    );
    const abort = new AbortController();
    let work: StreamWork;
    try {
      work = await open(
        d.value,
        { write: (ch, b) => link.send(ch, b), end: (r) => void link.end(r) },
        abort.signal,
      );
    } catch (err) {
      link.close();
      this.counts.refused++;
      if (err instanceof StreamFailure)
        return encodeOpenAnswer({ ok: false, error: err.toError() });
      return refusal(500, "InternalError", `cannot open the stream: ${(err as Error).message}`);
    }
    link.attach({
      data: (ch, b) => {
        if (channelsOf(d.value.kind).fromHub.includes(ch)) return work.input?.(ch, b);
        this.counts.malformed++; // a channel that carries nothing to the device: dropped
      },
      control: (c) => {
        if (c.t === "resize") work.resize?.(c.width, c.height);
        else if (c.t === "eof") work.eof?.();
        else abort.abort();
      },
      failed: () => abort.abort(),
    });
    if (link.isClosed) {
      // Our connection failed, or the requester said nothing while the work opened.
      abort.abort();
      this.counts.refused++;
      return refusal(503, "ServiceUnavailable", "the stream broke as it opened");
    }
    this.counts.served++;
    return encodeOpenAnswer({ ok: true, id, window: link.startWindow() });
  }

  opener(node: string): OpenStream {
    return (req, out, signal) => this.open(node, req, out, signal);
  }

  private async open(
    node: string,
    req: StreamOpen,
    out: Parameters<OpenStream>[1],
    signal: AbortSignal,
  ): Promise<StreamWork> {
    const answer = await this.request(node, req);
    if (!answer.ok)
      throw new StreamFailure(answer.error.code, answer.error.reason, answer.error.message);
    const { id } = answer;
    const link = this.link(
      streamSubject(id, "in"),
      streamSubject(id, "out"),
      true,
      `holding node "${node}"`,
    );
    this.counts.opened++;
    link.attach({
      data: (ch, b) => {
        if (channelsOf(req.kind).fromAgent.includes(ch)) return out.write(ch, b);
        this.counts.malformed++; // a channel that carries nothing from the device: dropped
      },
      control: (c) => {
        if (c.t === "end")
          out.end({
            ...(c.exitCode !== undefined && { exitCode: c.exitCode }),
            ...(c.error !== undefined && { error: c.error }),
          });
      },
      failed: (error) => out.end({ error }),
    });
    link.addCredit(answer.window);
    link.start();
    if (signal.aborted) {
      link.abort();
      throw new StreamFailure(499, "ClientClosedRequest", "the client left");
    }
    signal.addEventListener("abort", () => link.abort(), { once: true });
    return {
      input: (ch, b) => link.send(ch, b),
      resize: (w, h) => link.resize(w, h),
      eof: () => void link.eof(),
    };
  }

  /** The holder's answer to an open, or the failure to tell the client. */
  private async request(node: string, req: StreamOpen) {
    const data = await this.requestOf(node, openSubject(node), encodeOpenRequest(req));
    const a = decodeOpenAnswer(data);
    if (a.ok) return a.value;
    this.counts.malformed++;
    throw new StreamFailure(
      502,
      "BadGateway",
      `the hub replica holding node "${node}" answered a malformed stream open: ${a.reason}`,
    );
  }

  /** The holder's reply to a request on `subject`, or the failure to tell the client. */
  private async requestOf(node: string, subject: string, body: string): Promise<Uint8Array> {
    const timeout = this.o.openTimeoutMs ?? 10_000;
    try {
      return (await this.o.nc.request(subject, body, { timeout })).data;
    } catch (err) {
      if (err instanceof RequestError && err.isNoResponders())
        throw new StreamFailure(
          503,
          "ServiceUnavailable",
          `node "${node}" is offline: no hub replica holds it`,
        );
      throw new StreamFailure(
        504,
        "Timeout",
        `the hub replica holding node "${node}" did not answer within ${timeout} ms: ${(err as Error).message}`,
      );
    }
  }
}
