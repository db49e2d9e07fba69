// The agent config fields of image pulls: how many at once and how fast they may begin. Names,
// meanings, defaults and flags are KubeletConfiguration's and the kubelet's; the kubelet sets
// maxParallelImagePulls in its file only, and here it has a flag like every other field.
// imagePullProgressDeadline is fleetlet's own (the kubelet has none; containerd 1.7 has a
// setting of the same kind, image_pull_progress_timeout).
import { z } from "zod";
import { durationOrZero, integerFrom } from "./schema-parts.ts";

const notNegative = integerFrom(0, "must not be a negative number");

export const pullConfigFields = {
  serializeImagePulls: z.boolean({ error: "must be true or false" }).optional(),
  maxParallelImagePulls: integerFrom(1, "must be a positive number").optional(),
  registryPullQPS: notNegative.optional(),
  registryBurst: notNegative.optional(),
  imagePullProgressDeadline: durationOrZero.optional(),
};

/** Flags of these fields (without "--") → field. */
export const pullFlags: [string, string][] = [
  ["serialize-image-pulls", "serializeImagePulls"],
  ["max-parallel-image-pulls", "maxParallelImagePulls"],
  ["registry-qps", "registryPullQPS"],
  ["registry-burst", "registryBurst"],
  ["image-pull-progress-deadline", "imagePullProgressDeadline"],
];

/** The integer fields among them (a flag's text becomes a number). */
export const pullIntegerFields: readonly string[] = [
  "maxParallelImagePulls",
  "registryPullQPS",
  "registryBurst",
];

/** A flag's text as the field's value: "true"/"false" for serializeImagePulls; anything else is
 * left for the schema to refuse, naming it. */
export function pullFlagValue(field: string, value: string): unknown {
  if (field === "serializeImagePulls" && (value === "true" || value === "false"))
    return value === "true";
  return value;
}
