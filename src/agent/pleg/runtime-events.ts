// Keeps the runtime's container event stream open for the PLEG: each event goes to the PLEG
// (which relists at once), the stream's opening and end switch the PLEG between its evented and
// its normal relist period, and a stream that ends (containerd restarting) is opened again after
// an exponential backoff with full jitter. When the stream (re)opens, the PLEG relists at once,
// so that an exit during the gap is seen then rather than at the next periodic relist.
//
// Invariants: run() never throws; it returns when aborted, or when the runtime serves no event
// stream at all (the PLEG then relists every relist period, as without events).

import type { ContainerEvent, ContainerEventHandler, CriError } from "../../cri/index.ts";
import { fullJitter } from "../../util/backoff.ts";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";

export interface RuntimeEventWatchDeps {
  clock: Clock;
  logger: Logger;
  /** Uniform in [0, 1), for jitter. */
  random?: () => number;
  /** Opens the runtime's event stream (the CRI client's containerEvents). */
  subscribe(handler: ContainerEventHandler, signal: AbortSignal): void;
  /** Each container event. */
  onEvent(event: ContainerEvent): void;
  /** The stream opened (true) or ended (false). */
  onFlowing(flowing: boolean): void;
  /** Reconnect backoff: full jitter over min(max, base × 2^attempt) (ms). */
  backoffBaseMs?: number;
  backoffMaxMs?: number;
}

export interface RuntimeEventWatch {
  /** Watches until `signal` aborts (or the runtime has no event stream). */
  run(signal: AbortSignal): Promise<void>;
  /** One stream, from opening to its end; resolves with why it ended. */
  watchOnce(signal: AbortSignal): Promise<CriError>;
}

/** A stream that lasted this long starts the backoff afresh when it ends. */
const HEALTHY_STREAM_MS = 10_000;

export function createRuntimeEventWatch(deps: RuntimeEventWatchDeps): RuntimeEventWatch {
  const base = deps.backoffBaseMs ?? 100;
  const max = deps.backoffMaxMs ?? 5000;
  const random = deps.random ?? Math.random;
  const log = deps.logger;

  function watchOnce(signal: AbortSignal): Promise<CriError> {
    return new Promise<CriError>((resolve) => {
      let open = false;
      deps.subscribe(
        {
          onOpen(source) {
            log.debug("watching the runtime's container events", { source });
            open = true;
            deps.onFlowing(true);
          },
          onEvent: (event) => deps.onEvent(event),
          onEnd(error) {
            if (open) deps.onFlowing(false);
            resolve(error);
          },
        },
        signal,
      );
    });
  }

  async function run(signal: AbortSignal): Promise<void> {
    let attempt = 0;
    while (!signal.aborted) {
      const opened = deps.clock.monotonic();
      const error = await watchOnce(signal);
      if (signal.aborted) return;
      if (error.code === "Unimplemented") {
        log.warn("the runtime serves no container events: exits are seen at each relist", {
          error: error.message,
        });
        return;
      }
      if (deps.clock.monotonic() - opened >= HEALTHY_STREAM_MS) attempt = 0;
      const delay = fullJitter(attempt++, base, max, random);
      log.info("the runtime's container event stream ended; opening it again", {
        error: error.message,
        inMs: delay,
      });
      try {
        await deps.clock.sleep(delay, signal);
      } catch {
        return;
      }
    }
  }

  return { run, watchOnce };
}
