// What a stream is to the code on either end of it (docs/protocol.md, "Streams"): work opened for
// a request, fed with input, producing output under flow control, ending with an exit code or an
// error. The agent's handlers implement OpenStream over the runtime; the hub's broker implements
// it over an agent's connection; the client adapters (exec, port-forward, logs) use either.
import type { StreamError, StreamOpen } from "../protocol/streams.ts";

/** The running work of one stream, as its opener returned it. */
export interface StreamWork {
  /** Data from the hub; resolves once passed on (its credit is then given back). */
  input?(channel: number, data: Uint8Array): Promise<void> | void;
  resize?(width: number, height: number): void;
  /** The client closed its input. */
  eof?(): void;
}

/** How a stream's work sends its output and ends. */
export interface StreamOutput {
  /** Queues output; resolves when it has been sent (wait before producing more). */
  write(channel: number, data: Uint8Array): Promise<void>;
  /** Ends the stream once its queued output is sent. */
  end(result: { exitCode?: number; error?: StreamError }): void;
}

/** Starts the work of a stream; rejects with a StreamFailure when it cannot. `signal` aborts
 * when the stream ends (the hub closed it, or the session ended). */
export type OpenStream = (
  req: StreamOpen,
  out: StreamOutput,
  signal: AbortSignal,
) => Promise<StreamWork>;

/** Why a stream could not start, with the HTTP status and Kubernetes reason for the client. */
export class StreamFailure extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
  ) {
    super(message);
    this.name = "StreamFailure";
  }

  toError(): StreamError {
    return { code: this.code, reason: this.reason, message: this.message };
  }
}
