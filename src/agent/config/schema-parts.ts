// zod pieces the agent config's field schemas share: durations (Go duration text, in ms) and
// bounded integers.
import { z } from "zod";
import { parseDuration } from "../../api/index.ts";

const DURATION_HINT = 'is not a duration (e.g. "20s", "5m")';

function toMs(value: string): number | undefined {
  try {
    return parseDuration(value);
  } catch {
    return undefined;
  }
}

const durationText = z
  .string({ error: `must be a duration string (e.g. "20s", "5m")` })
  .refine((v) => toMs(v) !== undefined, { error: DURATION_HINT })
  .transform((v) => toMs(v) ?? 0);

/** A duration greater than 0, in ms. */
export const duration = durationText.refine((ms) => ms > 0, { error: "must be greater than 0" });

/** A duration of 0 or more, in ms ("0s" turns the setting off). */
export const durationOrZero = durationText.refine((ms) => ms >= 0, {
  error: "must not be negative",
});

/** An integer of at least `min`; `error` says so when it is smaller. */
export const integerFrom = (min: number, error: string) =>
  z
    .number({ error: "must be an integer" })
    .int({ error: "must be an integer" })
    .min(min, { error });

/** A flag's "key<sep>value,key<sep>value" text as a map ("cpu=1,memory=1Gi" with "=",
 * "memory.available<100Mi" with "<"); a pair without `sep` maps its key to "" (which the field's
 * schema then refuses, naming it). */
export function flagPairs(value: string, sep: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of value.split(",")) {
    if (pair.trim() === "") continue;
    const at = pair.indexOf(sep);
    out[at < 0 ? pair.trim() : pair.slice(0, at).trim()] = at < 0 ? "" : pair.slice(at + 1).trim();
  }
  return out;
}
