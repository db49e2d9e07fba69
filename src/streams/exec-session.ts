// One interactive exec or attach as a client sees it: a WebSocket speaking the remote-command
// channel protocol (v5.channel.k8s.io and its older versions) on one side, a stream's work on the
// other (the hub's broker to a device, or the device's own runtime for the local API). Client stdin,
// terminal resizes and (v5) the end of stdin go to the work; the work's stdout and stderr come
// back, and its end is written on the error channel as the API server does (Success, the exit
// code, or what failed) before the socket closes. A message the protocol does not allow ends
// this session only.
import { failureStatus } from "../api/status.ts";
import { decodeChannel, encodeChannel, exitStatus, RC } from "../protocol/remotecommand.ts";
import type { StreamError, StreamOpen } from "../protocol/streams.ts";
import type { OpenStream, StreamWork } from "./types.ts";

/** The server side of a client's WebSocket (Bun's ServerWebSocket fits). */
export interface ClientSocket {
  /** Bun's contract: -1 when queued under backpressure, 0 when dropped, else bytes sent. */
  send(data: string | Uint8Array): number;
  close(code?: number, reason?: string): void;
}

/** How a session ended, for the audit log. */
interface SessionEnd {
  exitCode?: number;
  error?: string;
}

/** The streams a session serves: an exec's command, or an attach to a container's process. */
export type RemoteCommandOpen = Extract<StreamOpen, { kind: "exec" | "attach" }>;

export interface ExecSessionOptions {
  socket: ClientSocket;
  /** The subprotocol agreed with the client. */
  protocol: string;
  open: OpenStream;
  req: RemoteCommandOpen;
  onEnd?(end: SessionEnd): void;
}

export class ExecSession {
  private work: StreamWork | undefined;
  private readonly early: (string | Uint8Array)[] = [];
  private readonly abort = new AbortController();
  private drains: (() => void)[] = [];
  private done = false;

  constructor(private readonly o: ExecSessionOptions) {}

  /** Opens the stream; a failure is written to the client's error channel. */
  async start(): Promise<void> {
    try {
      this.work = await this.o.open(
        this.o.req,
        {
          write: (channel, data) => this.write(channel, data),
          end: (r) => this.finish(r),
        },
        this.abort.signal,
      );
    } catch (err) {
      const e = err as { code?: number; reason?: string; message: string };
      this.finish({
        error: { code: e.code ?? 500, reason: e.reason ?? "InternalError", message: e.message },
      });
      return;
    }
    for (const m of this.early.splice(0)) this.message(m);
  }

  private write(channel: number, data: Uint8Array): Promise<void> {
    if (this.done) return Promise.resolve();
    const sent = this.o.socket.send(encodeChannel(this.o.protocol, channel, data));
    if (sent !== -1) return Promise.resolve();
    return new Promise((resolve) => this.drains.push(resolve));
  }

  /** The client's socket drained. */
  drain(): void {
    for (const d of this.drains.splice(0)) d();
  }

  /** A message from the client. */
  message(msg: string | Uint8Array): void {
    if (this.done) return;
    const work = this.work;
    if (work === undefined) {
      this.early.push(msg);
      return;
    }
    const m = decodeChannel(this.o.protocol, msg);
    if (m === undefined) return;
    if (m.channel === RC.stdin && this.o.req.stdin === true) void work.input?.(RC.stdin, m.data);
    else if (m.channel === RC.resize) this.resize(work, m.data);
    else if (m.channel === RC.close && this.o.protocol.startsWith("v5.") && m.data[0] === RC.stdin)
      work.eof?.();
    else this.bad(`a message on channel ${m.channel}, which this ${this.o.req.kind} does not read`);
  }

  private resize(work: StreamWork, data: Uint8Array): void {
    let size: { Width?: unknown; Height?: unknown };
    try {
      size = JSON.parse(Buffer.from(data).toString());
    } catch {
      this.bad("a resize message that is not JSON");
      return;
    }
    const { Width, Height } = size;
    if (
      !Number.isInteger(Width) ||
      !Number.isInteger(Height) ||
      (Width as number) < 0 ||
      (Height as number) < 0
    ) {
      this.bad("a resize message without a Width and Height");
      return;
    }
    work.resize?.(Width as number, Height as number);
  }

  private bad(why: string): void {
    this.finish({ error: { code: 400, reason: "BadRequest", message: `the client sent ${why}` } });
  }

  /** The client left: end the stream. */
  closed(): void {
    if (this.done) return;
    this.done = true;
    this.abort.abort(new Error("the client left"));
    this.drain();
    this.o.onEnd?.({ error: "the client left" });
  }

  private finish(r: { exitCode?: number; error?: StreamError }): void {
    if (this.done) return;
    this.done = true;
    const status =
      r.error !== undefined
        ? failureStatus(r.error.reason, r.error.message, r.error.code)
        : exitStatus(r.exitCode ?? 0, this.o.req.kind === "exec" ? this.o.req.command : []);
    this.o.socket.send(
      encodeChannel(this.o.protocol, RC.error, Buffer.from(JSON.stringify(status))),
    );
    this.o.socket.close(1000, "");
    this.abort.abort(new Error(`the ${this.o.req.kind} ended`));
    this.drain();
    this.o.onEnd?.(
      r.error !== undefined ? { error: r.error.message } : { exitCode: r.exitCode ?? 0 },
    );
  }
}
