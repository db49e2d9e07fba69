// The agent config fields of garbage collection (dead containers and sandboxes). Names, meanings
// and defaults are KubeletConfiguration's (and the kubelet's flags') where the kubelet has the
// setting; the periods are constants in the kubelet and settings here, so that tests can run the
// loops fast.
import { duration, durationOrZero, integerFrom } from "./schema-parts.ts";

const noLimitOrCount = integerFrom(-1, "must be -1 (no limit) or more");

export const gcConfigFields = {
  minimumContainerTTLDuration: durationOrZero.optional(),
  maximumDeadContainersPerContainer: noLimitOrCount.optional(),
  maximumDeadContainers: noLimitOrCount.optional(),
  containerGCPeriod: duration.optional(),
};

/** Flags of these fields (without "--") → field: the kubelet's flag names where it has one. */
export const gcFlags: [string, string][] = [
  ["minimum-container-ttl-duration", "minimumContainerTTLDuration"],
  ["maximum-dead-containers-per-container", "maximumDeadContainersPerContainer"],
  ["maximum-dead-containers", "maximumDeadContainers"],
  ["container-gc-period", "containerGCPeriod"],
];

/** The integer fields among them (a flag's text becomes a number). */
export const gcIntegerFields: readonly string[] = [
  "maximumDeadContainersPerContainer",
  "maximumDeadContainers",
];
