// When an image pull may begin: the kubelet's serialized puller (one at a time, in the order
// asked) or its parallel one (at most maxParallelImagePulls at once; no bound when unset), and
// in front of the registry a token bucket of registryPullQPS refilling up to registryBurst,
// which refuses a pull rather than delaying it (the kubelet's "pull QPS exceeded").
//
// Invariants:
// - A pull waits for its slot first and takes a token only once it has one, as the kubelet's
//   throttle sits inside its puller; a refused pull gives its slot back at once.
// - A pull whose signal aborts while it waits never runs and takes no token.
// - Time is read from the injected clock only.

import { abortReason, type Clock } from "../../util/clock.ts";
import { PriorityLimiter } from "../../util/priority-limiter.ts";

/** The pull settings of the agent config (KubeletConfiguration's names). */
export interface PullSettings {
  /** One pull at a time, in the order asked. */
  serializeImagePulls: boolean;
  /** Pulls at once when not serialized; absent: no bound. */
  maxParallelImagePulls?: number;
  /** Tokens added per second; 0: no limit. */
  registryPullQPS: number;
  /** Tokens the bucket holds at most (and holds at start). */
  registryBurst: number;
}

/** The kubelet's error for a pull the token bucket refused (its message, word for word). */
const PULL_QPS_EXCEEDED = "pull QPS exceeded";

/** A slot is given up by a pull that runs longer than this, past the CRI client's own pull
 * deadline (10 min): only a pull that outlives its deadline can hold the others. */
const PULL_SLOT_RELEASE_MS = 15 * 60_000;

export interface Puller {
  /** Runs `pull` once its turn comes and the bucket has a token. Rejects with
   * Error(PULL_QPS_EXCEEDED) when the bucket is empty (then `pull` never runs), and with the
   * signal's reason when `signal` aborts while it waits (likewise). */
  run<T>(pull: () => Promise<T>, signal?: AbortSignal): Promise<T>;
}

/** A token bucket on the monotonic clock: `qps` tokens a second, at most `burst`, full at start. */
export class TokenBucket {
  /** Tokens in the bucket at `at` (fractions count toward the next). */
  private tokens: number;
  /** The monotonic time `tokens` was last brought up to date. */
  private at: number;

  constructor(
    private readonly qps: number,
    private readonly burst: number,
    private readonly clock: Clock,
  ) {
    this.tokens = burst;
    this.at = clock.monotonic();
  }

  /** Takes a token if there is one; never waits. */
  tryAccept(): boolean {
    const now = this.clock.monotonic();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.at) * this.qps) / 1000);
    this.at = now;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }
}

export function createPuller(settings: PullSettings, clock: Clock): Puller {
  const limit = settings.serializeImagePulls ? 1 : (settings.maxParallelImagePulls ?? 0);
  const slots = new PriorityLimiter(limit, clock, PULL_SLOT_RELEASE_MS);
  const bucket =
    settings.registryPullQPS > 0
      ? new TokenBucket(settings.registryPullQPS, settings.registryBurst, clock)
      : undefined;
  return {
    run(pull, signal) {
      if (signal?.aborted) return Promise.reject(abortReason(signal));
      // Every waiter has the same `at`, so the limiter's tie-break (the order asked) decides.
      return slots.run(
        { at: 0, name: "" },
        async () => {
          if (bucket && !bucket.tryAccept()) throw new Error(PULL_QPS_EXCEEDED);
          return pull();
        },
        signal,
      );
    },
  };
}
