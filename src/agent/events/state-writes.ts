// How the agent says that it cannot write a state file (the hub outbox, the desired state, the
// checkpoints, the image records, the credential), typically because its disk is full: a warning
// log naming the file and the error, and a Warning event "FailedToWriteState" on the node, then
// "StateWritten" when the same file is written again. Pods keep running either way: a state write
// never stops the agent. Invariants: per file, at most one log and one event per `intervalMs`
// while it keeps failing (the failures between are counted and said with the next); events are
// recorded from a microtask, never inside the failing write (the outbox's own write may fail while
// it records an event); nothing here throws.
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import type { EventRecorder } from "./index.ts";

/** Where a state write reports how it went. */
export interface StateWrites {
  /** A write of `file` failed with `error` (e.g. a FileWriteError with code ENOSPC). */
  failed(file: string, error: unknown): void;
  /** A write of `file` worked (after failures: says so once). */
  succeeded(file: string): void;
  /** Files whose last write failed (for the local API and tests). */
  failing(): string[];
}

export interface StateWritesDeps {
  clock: Clock;
  logger: Logger;
  recorder: Pick<EventRecorder, "event">;
  nodeName: string;
  /** Repeats of one file's failure are said at most this often (default 60 s). */
  intervalMs?: number;
}

export const FAILED_TO_WRITE_STATE = "FailedToWriteState";
export const STATE_WRITTEN = "StateWritten";

/** What is known of one file that failed. */
interface Failing {
  /** When its failure was last said (log and event). */
  saidAt: number;
  /** Failures since then, not yet said. */
  unsaid: number;
}

/** A reporter that says nothing (for parts made without the agent's recorder, as in tests). */
export const ignoreStateWrites: StateWrites = {
  failed() {},
  succeeded() {},
  failing: () => [],
};

export function createStateWrites(deps: StateWritesDeps): StateWrites {
  return new StateWriteReporter(deps);
}

class StateWriteReporter implements StateWrites {
  private readonly files = new Map<string, Failing>();
  private readonly intervalMs: number;

  constructor(private readonly deps: StateWritesDeps) {
    this.intervalMs = deps.intervalMs ?? 60_000;
  }

  failed(file: string, error: unknown): void {
    const now = this.deps.clock.now();
    const f = this.files.get(file);
    if (f !== undefined && now - f.saidAt < this.intervalMs) {
      f.unsaid++;
      return;
    }
    const repeats = f?.unsaid ?? 0;
    this.files.set(file, { saidAt: now, unsaid: 0 });
    const why = error instanceof Error ? error.message : String(error);
    this.deps.logger.warn("cannot write a state file; pods keep running", {
      file,
      error: why,
      ...(repeats > 0 && { failuresSinceLastSaid: repeats }),
    });
    this.record("Warning", FAILED_TO_WRITE_STATE, `cannot write ${file}: ${stripPath(why, file)}`);
  }

  succeeded(file: string): void {
    const f = this.files.get(file);
    if (f === undefined) return;
    this.files.delete(file);
    this.deps.logger.info("a state file is written again", { file, failuresUnsaid: f.unsaid });
    this.record("Normal", STATE_WRITTEN, `${file} is written again`);
  }

  failing(): string[] {
    return [...this.files.keys()];
  }

  private record(type: "Normal" | "Warning", reason: string, message: string): void {
    const node = { kind: "Node", namespace: "", name: this.deps.nodeName, uid: this.deps.nodeName };
    queueMicrotask(() => {
      try {
        this.deps.recorder.event(node, type, reason, message);
      } catch (err) {
        this.deps.logger.warn("cannot record a state write event", { reason, error: err });
      }
    });
  }
}

/** "cannot write F: ENOSPC…" says F once: the error's own "cannot write F: " is dropped. */
function stripPath(why: string, file: string): string {
  const prefix = `cannot write ${file}: `;
  return why.startsWith(prefix) ? why.slice(prefix.length) : why;
}

/** Runs `write` (a state write of `file`), reporting to `reporter`; rethrows its error. */
export function reportedWrite(reporter: StateWrites, file: string, write: () => void): void {
  try {
    write();
  } catch (err) {
    reporter.failed(file, err);
    throw err;
  }
  reporter.succeeded(file);
}
