// One way to run a property under fast-check in the suite and in the longer campaign
// (scripts/fuzz). The suite runs each property with its own fixed seed and a run count small
// enough to keep the suite quick; the campaign sets FLEETLET_FUZZ_SCALE (runs multiplied) and
// FLEETLET_FUZZ_SEED (a seed of its own, printed so that a failure replays), and
// FLEETLET_FUZZ_REPORT, a file where each property appends one JSON line: its name, seed, runs,
// total and slowest milliseconds per input. Time is reported, never asserted.
import { appendFileSync } from "node:fs";
import fc from "fast-check";

export interface FuzzOptions {
  /** The suite's fixed seed for this property. */
  seed: number;
  /** Runs in the suite; the campaign multiplies them. */
  runs: number;
}

function envNumber(name: string): number | undefined {
  const v = process.env[name];
  if (v === undefined || v === "") return undefined;
  const n = Number(v);
  if (!Number.isFinite(n)) throw new Error(`${name}=${v} is not a number`);
  return n;
}

/** A property test's timeout: `ms` in the suite, multiplied by the campaign's scale (a property
 * run a hundred times over needs a hundred times as long on a loaded machine). */
export function fuzzTimeout(ms: number): number {
  return ms * Math.max(1, envNumber("FLEETLET_FUZZ_SCALE") ?? 1);
}

/**
 * Asserts `check` for every value `arb` makes (an async check is awaited); on failure
 * fast-check's error names the seed, the path and the shrunk counterexample.
 */
export async function fuzz<T>(
  name: string,
  arb: fc.Arbitrary<T>,
  check: (value: T) => void | Promise<void>,
  opts: FuzzOptions,
): Promise<void> {
  const seed = envNumber("FLEETLET_FUZZ_SEED") ?? opts.seed;
  const numRuns = Math.max(1, Math.round(opts.runs * (envNumber("FLEETLET_FUZZ_SCALE") ?? 1)));
  let slowest = 0;
  const started = performance.now();
  const timed = async (value: T) => {
    const t0 = performance.now();
    await check(value);
    slowest = Math.max(slowest, performance.now() - t0);
  };
  await fc.assert(fc.asyncProperty(arb, timed), { seed, numRuns });
  const report = process.env.FLEETLET_FUZZ_REPORT;
  if (report !== undefined && report !== "") {
    const totalMs = Math.round(performance.now() - started);
    const line = { name, seed, runs: numRuns, totalMs, slowestMs: Math.round(slowest * 10) / 10 };
    appendFileSync(report, `${JSON.stringify(line)}\n`);
  }
}
