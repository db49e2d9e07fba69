// When the PLEG relists (pure functions of its state and the time, all on the monotonic clock): every relist period; every
// evented period instead while the runtime's event stream has been open for at least one relist
// period (the relist is then the safety net); 20 ms after a relist that left changes for later,
// doubling up to the relist period; and soon after a container event, again shortly
// while the listing does not show the event yet (containerd publishes a task's exit before its
// CRI plugin has recorded it: containerd 1.6.20 here, from the container's last moment, p50
// /tasks/exit 8 ms, /tasks/delete 70 ms, the listing showing the exit 120 ms).

import type { Clock } from "../../util/clock.ts";
import type { RelistPod } from "./diff.ts";

/** Relists after an unconfirmed event: every 10 ms for the first STEADY_RETRIES (containerd
 * records an exit some 40-65 ms after its /tasks/delete, so the one relist that matters falls
 * there), then doubling, at most this many (~5 s: a busy device's containerd may take seconds
 * to record an exit). */
export const EVENT_RETRIES = 13;
const STEADY_RETRIES = 5;
const FIRST_RETRY_MS = 10;
/** Relists while changes are left for later (a pod a sync acts on): 20 ms, then doubling up to
 * the relist period, so that a change left while a short sync ran is taken ms after it. */
const FIRST_DEFERRED_MS = 20;

export interface ScheduleState {
  now: number;
  relistPeriodMs: number;
  eventedRelistPeriodMs: number;
  /** When the event stream (re)opened, while it is open. */
  flowingSince: number | undefined;
  /** When the last relist ended (monotonic ms; 0 before the first). */
  lastEnd: number;
  /** When a relist is due sooner than the period (events, retries), if one is. */
  soonAt: number | undefined;
}

/** The relist period in force: the evented one once the stream has flowed for a period. */
export function currentPeriod(s: Omit<ScheduleState, "lastEnd" | "soonAt">): number {
  const trusted = s.flowingSince !== undefined && s.now - s.flowingSince >= s.relistPeriodMs;
  return trusted ? s.eventedRelistPeriodMs : s.relistPeriodMs;
}

/** When the next relist is due (monotonic ms). */
export function nextRelistAt(s: ScheduleState): number {
  const periodic = s.lastEnd + currentPeriod(s);
  return s.soonAt === undefined ? periodic : Math.min(periodic, s.soonAt);
}

/** The wait before relisting again for an event still not shown after `retries` relists. */
export function retryDelay(retries: number): number {
  return FIRST_RETRY_MS * 2 ** Math.max(0, retries - STEADY_RETRIES);
}

/** Whether a listing shows container (or sandbox) `id` as no longer running: exited, not
 * ready, or gone. */
export function showsStopped(pods: readonly RelistPod[], id: string): boolean {
  for (const pod of pods) {
    const c = pod.containers.find((x) => x.id === id);
    if (c !== undefined) return c.state !== "running";
    const sb = pod.sandboxes?.find((x) => x.id === id);
    if (sb !== undefined) return sb.state !== "ready";
  }
  return true;
}

/** The kinds of container event that make the PLEG relist soon: a container stopped or went.
 * Starts and creations are the agent's own doing (its syncs read them) or are caught by the
 * periodic relist. */
const RELIST_ON: ReadonlySet<string> = new Set(["exited", "oom", "deleted"]);

/**
 * The PLEG's relist timing: holds the event stream's state and the events not yet shown by a
 * listing, and sleeps until the next relist is due (woken early by an event).
 */
export class RelistScheduler {
  private flowingSince: number | undefined;
  private soonAt: number | undefined;
  private lastEnd = 0;
  /** Relists in a row that left changes for later (0 once one left none). */
  private deferredRuns = 0;
  /** Containers an event said stopped, not yet shown so by a listing: relists done since. */
  private readonly awaiting = new Map<string, number>();
  /** Aborted to cut the current wait short. */
  private wake = new AbortController();

  constructor(
    private readonly relistPeriodMs: number,
    private readonly eventedRelistPeriodMs: number,
  ) {}

  /** A container event at `now`. Returns whether it asks for a relist. A further event for a
   * container still awaited (containerd's /tasks/delete after its /tasks/exit: the CRI plugin
   * records the exit some 40-65 ms after it) starts its retries afresh, every 10 ms, then doubling,
   * so that the listing showing the exit is seen within ms rather than after a retry delay
   * grown while the runtime had not got that far. */
  notify(event: { containerId: string; kind: string }, now: number): boolean {
    if (!RELIST_ON.has(event.kind)) return false;
    this.awaiting.set(event.containerId, 0);
    this.soon(now);
    return true;
  }

  /** The event stream opened (a relist is due at once) or ended. */
  setFlowing(flowing: boolean, now: number): void {
    if (flowing) {
      this.flowingSince = now;
      this.soon(now);
    } else this.flowingSince = undefined;
  }

  /** A relist ended at `now`, with its listing (undefined when listing failed); `unfinished`:
   * it left changes for the next relist (a pod a sync is acting on, a status read that failed),
   * which then comes 20 ms later, doubling in a row up to the relist period (never the evented
   * one). */
  relisted(pods: readonly RelistPod[] | undefined, now: number, unfinished = false): void {
    this.lastEnd = now;
    this.deferredRuns = unfinished ? this.deferredRuns + 1 : 0;
    this.soonAt = unfinished
      ? now + Math.min(this.relistPeriodMs, FIRST_DEFERRED_MS * 2 ** (this.deferredRuns - 1))
      : undefined;
    for (const [id, done] of this.awaiting) {
      if (pods !== undefined && showsStopped(pods, id)) this.awaiting.delete(id);
      else if (done + 1 > EVENT_RETRIES) this.awaiting.delete(id);
      else this.awaiting.set(id, done + 1);
    }
    // The newest event waits least: 10 ms apart for its first relists, then doubling.
    if (this.awaiting.size > 0) {
      this.soonAt = Math.min(
        this.soonAt ?? Number.POSITIVE_INFINITY,
        now + retryDelay(minOf(this.awaiting)),
      );
    }
  }

  /** The period in force at `now`. */
  period(now: number): number {
    return currentPeriod(this.state(now));
  }

  /** When the next relist is due, as seen at `now`. */
  nextAt(now: number): number {
    return nextRelistAt(this.state(now));
  }

  /** Sleeps until the next relist is due; resolves early when aborted or woken by an event. */
  async wait(clock: Clock, signal: AbortSignal): Promise<void> {
    for (;;) {
      const delay = this.nextAt(clock.monotonic()) - clock.monotonic();
      if (delay <= 0 || signal.aborted) return;
      this.wake = new AbortController();
      try {
        await clock.sleep(delay, AbortSignal.any([signal, this.wake.signal]));
        return;
      } catch {
        // woken by an event (the due time moved) or aborted: look again
      }
    }
  }

  private soon(now: number): void {
    this.soonAt = Math.min(this.soonAt ?? now, now);
    this.wake.abort();
  }

  private state(now: number): ScheduleState {
    return {
      now,
      relistPeriodMs: this.relistPeriodMs,
      eventedRelistPeriodMs: this.eventedRelistPeriodMs,
      flowingSince: this.flowingSince,
      lastEnd: this.lastEnd,
      soonAt: this.soonAt,
    };
  }
}

function minOf(m: Map<string, number>): number {
  let min = Number.POSITIVE_INFINITY;
  for (const v of m.values()) min = Math.min(min, v);
  return min;
}
