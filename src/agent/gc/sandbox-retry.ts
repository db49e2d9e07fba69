// The sandboxes the container GC could not remove. A sandbox whose network the runtime cannot
// tear down (after a power cut, containerd 1.6 finds the CNI plugins' cached result empty and
// every StopPodSandbox fails) would otherwise be tried, and logged, at every pass for as long as
// the device runs. Instead:
// - the first failure is reported once: a Warning node event (ContainerGCFailed) and a log line
//   naming the sandbox, its pod and the runtime's error;
// - the sandbox is tried again after one GC period, then after twice as long each time, up to
//   30 periods (30 minutes with the default period); later failures are logged at debug level;
// - once it is removed, a log line says so and it is forgotten; so is a sandbox that is gone
//   from the runtime's listing.
import { Backoff } from "../../util/backoff.ts";
import type { Logger } from "../../util/log.ts";

/** The longest wait between two attempts, in GC periods. */
const MAX_RETRY_PERIODS = 30;

export interface SandboxRetryDeps {
  logger: Logger;
  /** The GC period: the first wait after a failure. */
  periodMs: number;
  /** A Warning event about the node. */
  nodeEvent(reason: string, message: string): void;
}

export class SandboxRetries {
  private readonly backoff: Backoff;
  /** Failed attempts of each sandbox not yet removed. */
  private readonly failures = new Map<string, number>();

  constructor(private readonly deps: SandboxRetryDeps) {
    const maxMs = deps.periodMs * MAX_RETRY_PERIODS;
    // Entries are never reset by age: a failing sandbox is tried at least every maxMs.
    this.backoff = new Backoff({ initialMs: deps.periodMs, maxMs, resetAfterMs: Infinity });
  }

  /** Whether the sandbox waits out its back-off at `now` (it is not tried then). */
  waiting(id: string, now: number): boolean {
    return this.backoff.isInBackoff(id, now);
  }

  /** Records a failed removal of the sandbox of `pod` ("namespace/name"). */
  failed(id: string, pod: string, error: string, now: number): void {
    const attempts = (this.failures.get(id) ?? 0) + 1;
    this.failures.set(id, attempts);
    const delayMs = this.backoff.next(id, now);
    const fields = { sandbox: id, pod, attempts, retryInSeconds: delayMs / 1000, error };
    if (attempts > 1) {
      this.deps.logger.debug("container GC: the sandbox still cannot be removed", fields);
      return;
    }
    this.deps.logger.warn(
      "container GC: cannot remove a sandbox; retrying with a back-off",
      fields,
    );
    const maxMinutes = (this.deps.periodMs * MAX_RETRY_PERIODS) / 60_000;
    this.deps.nodeEvent(
      "ContainerGCFailed",
      `Cannot remove sandbox ${id} of pod "${pod}": ${error}; trying again with a back-off (at most every ${formatMinutes(maxMinutes)})`,
    );
  }

  /** The sandbox was removed: forgets it, saying so if it had failed before. */
  removed(id: string, pod: string): void {
    const attempts = this.failures.get(id);
    if (attempts === undefined) return;
    this.deps.logger.info("container GC: removed a sandbox that could not be removed before", {
      sandbox: id,
      pod,
      failedAttempts: attempts,
    });
    this.forget(id);
  }

  /** Forgets the sandboxes that are not in `present` (removed by something else). */
  keepOnly(present: ReadonlySet<string>): void {
    for (const id of this.failures.keys()) if (!present.has(id)) this.forget(id);
  }

  private forget(id: string): void {
    this.failures.delete(id);
    this.backoff.reset(id);
  }
}

function formatMinutes(minutes: number): string {
  return minutes >= 1 ? `${Number(minutes.toFixed(1))} min` : `${Math.round(minutes * 60)} s`;
}
