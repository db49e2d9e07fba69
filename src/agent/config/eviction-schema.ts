// The agent config fields of the eviction manager, named and checked as KubeletConfiguration's
// (evictionHard, evictionSoft, evictionSoftGracePeriod, evictionMinimumReclaim,
// evictionMaxPodGracePeriod, evictionPressureTransitionPeriod), plus fleetlet's
// evictionMonitoringPeriod and evictionMemoryStall. Each bad value is an error naming the field,
// the signal and the value; the rules are the eviction manager's (eviction/thresholds.ts).
import { z } from "zod";
import { CONFIG_SIGNALS } from "../evictionapi/signals.ts";
import {
  checkGracePeriod,
  checkMinReclaim,
  checkStall,
  checkThresholdValue,
  isConfigSignal,
} from "../evictionapi/thresholds.ts";
import { duration, durationOrZero, flagPairs } from "./schema-parts.ts";

const SIGNAL_LIST = CONFIG_SIGNALS.join(", ");

/** A map of signal → text, each checked by `check` (which returns an error or not). */
function signalMap(check: (text: string) => { error: string } | object, example: string) {
  return z
    .record(
      z.string(),
      z
        .union([z.string(), z.number()], { error: `must be a string such as ${example}` })
        .transform((v) => String(v)),
      { error: `must be a map of signal to value, e.g. {memory.available: ${example}}` },
    )
    .superRefine((m, ctx) => {
      for (const [signal, text] of Object.entries(m)) {
        if (!isConfigSignal(signal)) {
          ctx.addIssue({
            code: "custom",
            message: `${JSON.stringify(signal)} is not an eviction signal (one of ${SIGNAL_LIST})`,
            params: { wholeMessage: true },
          });
          continue;
        }
        const result = check(text);
        if ("error" in result)
          ctx.addIssue({ code: "custom", path: [signal], message: result.error });
      }
    });
}

const thresholds = signalMap(checkThresholdValue, '"100Mi" or "10%"');

const gracePeriods = signalMap(checkGracePeriod, '"1m30s"').transform((m) => {
  const out: Record<string, number> = {};
  for (const [signal, text] of Object.entries(m)) {
    const r = checkGracePeriod(text);
    if ("ms" in r) out[signal] = r.ms;
  }
  return out;
});

export const evictionConfigFields = {
  evictionHard: thresholds.optional(),
  evictionSoft: thresholds.optional(),
  evictionSoftGracePeriod: gracePeriods.optional(),
  evictionMinimumReclaim: signalMap(checkMinReclaim, '"500Mi" or "5%"').optional(),
  evictionMaxPodGracePeriod: z
    .number({ error: "must be an integer (seconds)" })
    .int({ error: "must be an integer (seconds)" })
    .optional(),
  evictionPressureTransitionPeriod: durationOrZero.optional(),
  evictionMonitoringPeriod: duration.optional(),
  evictionMemoryStall: z
    .union([z.string(), z.number()], { error: 'must be a percentage such as "25%"' })
    .transform((v) => (typeof v === "number" ? `${v}%` : v))
    .superRefine((v, ctx) => {
      const r = checkStall(v);
      if ("error" in r) ctx.addIssue({ code: "custom", message: r.error });
    })
    .optional(),
};

/** Flags of these fields: name (without "--") → field. */
export const evictionFlags: [string, string][] = [
  ["eviction-hard", "evictionHard"],
  ["eviction-soft", "evictionSoft"],
  ["eviction-soft-grace-period", "evictionSoftGracePeriod"],
  ["eviction-minimum-reclaim", "evictionMinimumReclaim"],
  ["eviction-max-pod-grace-period", "evictionMaxPodGracePeriod"],
  ["eviction-pressure-transition-period", "evictionPressureTransitionPeriod"],
  ["eviction-monitoring-period", "evictionMonitoringPeriod"],
  ["eviction-memory-stall", "evictionMemoryStall"],
];

/** A flag's text as the field's value, as the kubelet's flags: "memory.available<100Mi,..."
 * for thresholds, "memory.available=1m30s,..." for grace periods and minimum reclaims. */
export function evictionFlagValue(field: string, value: string): unknown {
  if (field === "evictionMaxPodGracePeriod") return /^-?\d+$/.test(value) ? Number(value) : value;
  const sep =
    field === "evictionHard" || field === "evictionSoft"
      ? "<"
      : field === "evictionSoftGracePeriod" || field === "evictionMinimumReclaim"
        ? "="
        : undefined;
  return sep === undefined ? value : flagPairs(value, sep);
}
