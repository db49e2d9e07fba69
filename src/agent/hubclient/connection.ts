// The connection part of a hub session: one socket from dial to close. It dials with the
// credential, hands each received frame on, sends text and binary frames, keeps the session's
// timers (all cancelled when it ends) and resolves `done` exactly once with how it ended.
// Nothing here decodes messages or knows the protocol's order (router.ts, session.ts do).
import type { ErrorMessage } from "../../protocol/index.ts";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import type { Dial, HubSocket } from "./socket.ts";

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

export interface ConnectionDeps {
  clock: Clock;
  logger: Logger;
  dial: Dial;
  url: string;
  credential: string;
  /** The socket opened (say hello). */
  onOpen(): void;
  /** A frame arrived (before `done`). */
  onFrame(data: string | ArrayBuffer | Uint8Array): void;
  /** The connection ended, by either side (called once, before `done` resolves). */
  onEnd?(): void;
}

export class Connection {
  readonly done: Promise<SessionResult>;
  /** When anything was last received or sent (ms, the clock's monotonic reading). */
  lastHeard: number;
  lastSent: number;
  /** Set by the session once welcome arrived. */
  welcomed = false;
  /** The hub's `error` message, kept for the result. */
  hubError: ErrorMessage | undefined;
  /** When the connection was dialled (monotonic ms). */
  private readonly started: number;
  private socket: HubSocket | undefined;
  private ended = false;
  private readonly timers = new Set<() => void>();
  private resolve: (r: SessionResult) => void = () => {};

  constructor(private readonly deps: ConnectionDeps) {
    this.started = deps.clock.monotonic();
    this.lastHeard = this.started;
    this.lastSent = this.started;
    this.done = new Promise((r) => {
      this.resolve = r;
    });
    try {
      this.socket = deps.dial(
        deps.url,
        { authorization: `Bearer ${deps.credential}` },
        {
          onOpen: () => {
            if (!this.ended) deps.onOpen();
          },
          onMessage: (data) => {
            if (this.ended) return;
            this.lastHeard = deps.clock.monotonic();
            deps.onFrame(data);
          },
          onClose: (code, reason) => this.finish(code, reason || "connection closed"),
        },
      );
    } catch (err) {
      this.finish(1006, `cannot connect to ${deps.url}: ${(err as Error).message}`);
    }
  }

  get finished(): boolean {
    return this.ended;
  }

  /** Runs `fn` after `ms` unless the connection ended first; returns the cancel. */
  setTimer(ms: number, fn: () => void): () => void {
    const cancel = this.deps.clock.setTimer(ms, () => {
      this.timers.delete(cancel);
      if (!this.ended) fn();
    });
    this.timers.add(cancel);
    return cancel;
  }

  /** Sends one frame; a failure closes the connection and returns false. */
  send(data: string | Uint8Array): boolean {
    if (this.ended || this.socket === undefined) return false;
    try {
      this.socket.send(data);
      this.lastSent = this.deps.clock.monotonic();
      return true;
    } catch (err) {
      this.close(1011, `cannot send to the hub: ${(err as Error).message}`);
      return false;
    }
  }

  sendJson(message: object): boolean {
    return this.send(JSON.stringify(message));
  }

  /** Bytes queued in the socket and not yet written. */
  buffered(): number {
    return this.socket?.bufferedAmount() ?? 0;
  }

  /** Closes the socket (if any) and ends the connection with `code` and `reason`. */
  close(code: number, reason: string): void {
    if (this.ended) return;
    try {
      this.socket?.close(code, reason);
    } catch (err) {
      this.deps.logger.debug("closing the hub socket failed", { error: err });
    }
    this.finish(code, reason);
  }

  private finish(code: number, reason: string): void {
    if (this.ended) return;
    this.ended = true;
    for (const cancel of this.timers) cancel();
    this.timers.clear();
    try {
      this.deps.onEnd?.();
    } catch (err) {
      this.deps.logger.error("ending the hub session failed", { error: err });
    }
    this.resolve({
      welcomed: this.welcomed,
      durationMs: this.deps.clock.monotonic() - this.started,
      code,
      reason,
      ...(this.hubError !== undefined && { error: this.hubError }),
    });
  }
}
