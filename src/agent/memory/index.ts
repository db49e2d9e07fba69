// Giving memory back on a small device: after a burst of work (many pods starting at once) the
// JavaScript heap stays at its peak size until a full collection runs, and a quiet agent rarely
// triggers one. So a full collection runs every `periodMs`; with ~100 pods it costs a few ms of
// CPU each time.
import type { Clock } from "../../util/clock.ts";

const MEMORY_TRIM_PERIOD_MS = 30_000;

/** Runs a full garbage collection every `periodMs` until `signal` aborts. */
export async function runMemoryTrim(
  clock: Clock,
  signal: AbortSignal,
  periodMs = MEMORY_TRIM_PERIOD_MS,
  collect: () => void = () => Bun.gc(true),
): Promise<void> {
  while (!signal.aborted) {
    try {
      await clock.sleep(periodMs, signal);
    } catch {
      return;
    }
    collect();
  }
}
