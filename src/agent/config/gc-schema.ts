// The agent config fields of garbage collection (dead containers, sandboxes, images) and of
// container log rotation. Names, meanings and defaults are KubeletConfiguration's (and the
// kubelet's flags') where the kubelet has the setting; the periods are constants in the kubelet
// and settings here, so that tests can run the loops fast.
import { z } from "zod";
import { memoryToBytes, tryParseQuantity } from "../../api/index.ts";
import { duration, durationOrZero, integerFrom } from "./schema-parts.ts";

const percent = integerFrom(0, "must be between 0 and 100").max(100, {
  error: "must be between 0 and 100",
});

const noLimitOrCount = integerFrom(-1, "must be -1 (no limit) or more");

/** A size such as "10Mi", in bytes, greater than 0. */
const size = z
  .union([z.string(), z.number()], { error: 'must be a quantity such as "10Mi"' })
  .transform((v) => String(v))
  .refine((v) => (tryParseQuantity(v)?.num ?? 0n) > 0n, {
    error: 'is not a quantity greater than 0 (e.g. "10Mi")',
  })
  .transform((v) => memoryToBytes(v));

export const gcConfigFields = {
  minimumContainerTTLDuration: durationOrZero.optional(),
  maximumDeadContainersPerContainer: noLimitOrCount.optional(),
  maximumDeadContainers: noLimitOrCount.optional(),
  containerGCPeriod: duration.optional(),
  imageGCPeriod: duration.optional(),
  imageGCHighThresholdPercent: percent.optional(),
  imageGCLowThresholdPercent: percent.optional(),
  imageMinimumGCAge: durationOrZero.optional(),
  imageMaximumGCAge: durationOrZero.optional(),
  nodeStatusMaxImages: noLimitOrCount.optional(),
  containerLogMaxSize: size.optional(),
  containerLogMaxFiles: integerFrom(2, "must be at least 2").optional(),
  containerLogMonitorInterval: duration.optional(),
};

/** Flags of these fields (without "--") → field: the kubelet's flag names where it has one. */
export const gcFlags: [string, string][] = [
  ["minimum-container-ttl-duration", "minimumContainerTTLDuration"],
  ["maximum-dead-containers-per-container", "maximumDeadContainersPerContainer"],
  ["maximum-dead-containers", "maximumDeadContainers"],
  ["container-gc-period", "containerGCPeriod"],
  ["image-gc-period", "imageGCPeriod"],
  ["image-gc-high-threshold", "imageGCHighThresholdPercent"],
  ["image-gc-low-threshold", "imageGCLowThresholdPercent"],
  ["minimum-image-ttl-duration", "imageMinimumGCAge"],
  ["image-maximum-gc-age", "imageMaximumGCAge"],
  ["node-status-max-images", "nodeStatusMaxImages"],
  ["container-log-max-size", "containerLogMaxSize"],
  ["container-log-max-files", "containerLogMaxFiles"],
  ["container-log-monitor-interval", "containerLogMonitorInterval"],
];

/** The integer fields among them (a flag's text becomes a number). */
export const gcIntegerFields: readonly string[] = [
  "maximumDeadContainersPerContainer",
  "maximumDeadContainers",
  "imageGCHighThresholdPercent",
  "imageGCLowThresholdPercent",
  "nodeStatusMaxImages",
  "containerLogMaxFiles",
];
