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
