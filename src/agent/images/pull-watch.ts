// Watches one running pull: lists the runtime's ingests every intervalMs while the pull runs,
// reports the pull's figures when they change, and aborts `stalled` once the pull has waited
// for bytes for deadlineMs with none written (progress.ts says when a pull waits).
//
// Invariants:
// - Nothing is listed before begin() or after the signal given to run() aborts or the pull
//   stalls: one listing at a time, only while the pull runs.
// - A listing that fails changes nothing: it neither counts as progress nor as a stall; a
//   runtime that cannot list at all (not containerd) leaves the pull unwatched.
// - `stalled` aborts at most once, and only when deadlineMs > 0.
import type { IngestStatus } from "../../cri/containerd.ts";
import { type Clock, sleepQuietly } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import {
  beginProgress,
  figuresOf,
  observeIngests,
  type ProgressState,
  type PullFigures,
  stalledFor,
} from "./progress.ts";

/** The runtime's ingests, and how the agent watches pulls with them. */
export interface PullProgressSource {
  /** The ingests in progress in the runtime's content store; rejects when it cannot list
   * (a call with its own deadline). */
  listIngests(signal: AbortSignal): Promise<IngestStatus[]>;
  /** How often a running pull's ingests are listed (ms). */
  intervalMs: number;
  /** A pull that waits this long for bytes with none written is cancelled (ms); 0: never. */
  deadlineMs: number;
}

export class PullWatch {
  /** Aborted when the pull stalls. */
  private readonly stall = new AbortController();
  /** Undefined until begin() has listed, and when the runtime cannot list. */
  private state: ProgressState | undefined;
  /** The figures last reported. */
  private reported: PullFigures = { done: 0, total: 0 };

  constructor(
    private readonly source: PullProgressSource,
    private readonly clock: Clock,
    private readonly logger: Logger,
    /** Called with the figures each time they change. */
    private readonly onFigures: (figures: PullFigures) => void,
  ) {}

  /** Aborts when the pull has stalled (never when deadlineMs is 0). */
  get stalled(): AbortSignal {
    return this.stall.signal;
  }

  /** The pull's figures so far. */
  figures(): PullFigures {
    return this.state ? figuresOf(this.state) : { done: 0, total: 0 };
  }

  /** Lists the ingests there before the pull (call just before it begins); false when the
   * runtime cannot list, and then nothing is watched. */
  async begin(signal: AbortSignal): Promise<boolean> {
    try {
      this.state = beginProgress(await this.source.listIngests(signal), this.clock.monotonic());
      return true;
    } catch (err) {
      this.logger.debug("pull progress not available", { error: (err as Error).message });
      return false;
    }
  }

  /** One listing: updates the figures (reporting a change) and aborts `stalled` when the pull
   * has waited for bytes past the deadline. */
  async poll(signal: AbortSignal): Promise<void> {
    if (this.state === undefined || this.stall.signal.aborted) return;
    let ingests: IngestStatus[];
    try {
      ingests = await this.source.listIngests(signal);
    } catch (err) {
      if (!signal.aborted) {
        this.logger.debug("could not list the pull's ingests", { error: (err as Error).message });
      }
      return;
    }
    if (signal.aborted) return;
    const now = this.clock.monotonic();
    this.state = observeIngests(this.state, ingests, now);
    const figures = figuresOf(this.state);
    if (figures.done !== this.reported.done || figures.total !== this.reported.total) {
      this.reported = figures;
      this.onFigures(figures);
    }
    const deadline = this.source.deadlineMs;
    if (deadline > 0 && stalledFor(this.state, now) >= deadline) this.stall.abort();
  }

  /** Polls every intervalMs until `signal` aborts or the pull stalls; never throws. */
  async run(signal: AbortSignal): Promise<void> {
    if (this.state === undefined) return;
    while (!signal.aborted && !this.stall.signal.aborted) {
      await sleepQuietly(this.clock, this.source.intervalMs, signal);
      if (!signal.aborted) await this.poll(signal);
    }
  }
}
