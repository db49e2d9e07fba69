// One loop over several inputs (the kubelet's syncLoopIteration select): each input has one read
// outstanding; reads that answer are handled one at a time in the order they answered, and each
// input is read again once its value is handled. A read that fails (other than by the abort) is
// logged with what failed and read again a second later, so a broken input can neither stop nor
// spin the loop.
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";

export interface LoopInput<T> {
  /** What it delivers, for the log: "pod update", "PLEG event". */
  what: string;
  /** Waits for the next value; rejects when `signal` aborts. */
  next(signal: AbortSignal): Promise<T>;
  /** Handles a value; never throws. */
  handle(value: T): void;
}

type Outcome =
  | { input: LoopInput<unknown>; ok: true; value: unknown }
  | { input: LoopInput<unknown>; ok: false; error: unknown };

export async function selectLoop(
  inputs: readonly LoopInput<unknown>[],
  deps: { clock: Clock; logger: Logger },
  signal: AbortSignal,
): Promise<void> {
  const ready: Outcome[] = [];
  let wake: (() => void) | undefined;
  const settle = (outcome: Outcome) => {
    ready.push(outcome);
    wake?.();
  };
  const read = (input: LoopInput<unknown>, wait: () => Promise<unknown>) => {
    wait().then(
      (value) => settle({ input, ok: true, value }),
      (error) => settle({ input, ok: false, error }),
    );
  };
  const onAbort = () => wake?.();
  signal.addEventListener("abort", onAbort, { once: true });
  for (const input of inputs) read(input, () => input.next(signal));
  while (!signal.aborted) {
    const outcome = ready.shift();
    if (outcome === undefined) {
      await new Promise<void>((resolve) => {
        wake = resolve;
      });
      wake = undefined;
      continue;
    }
    const { input } = outcome;
    if (outcome.ok) {
      input.handle(outcome.value);
      read(input, () => input.next(signal));
    } else if (!signal.aborted) {
      deps.logger.error(`reading the next ${input.what} failed; trying again in 1 s`, {
        error: outcome.error,
      });
      read(input, () => deps.clock.sleep(1000, signal).then(() => input.next(signal)));
    }
  }
  signal.removeEventListener("abort", onAbort);
}
