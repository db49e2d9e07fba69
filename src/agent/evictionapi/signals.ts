// evictionapi (the kubelet's pkg/kubelet/eviction/api): the eviction signals and thresholds
// that config/, cm/ and eviction/ share. A leaf: it imports nothing from the agent's managers.
//
// The eviction signals, as the kubelet names them, with the resource each one reclaims and the
// node condition it drives. `memory.stall` is fleetlet's: the node's memory pressure stall
// information (PSI "some" avg10, a percentage), set by the evictionMemoryStall field rather than
// in evictionHard; it counts as memory pressure.
import type { NodeConditionType } from "../../api/node.ts";

/** The signals a user may write in evictionHard, evictionSoft and their companions. */
export const CONFIG_SIGNALS = [
  "memory.available",
  "nodefs.available",
  "nodefs.inodesFree",
  "imagefs.available",
  "imagefs.inodesFree",
  "pid.available",
] as const;

export type ConfigSignal = (typeof CONFIG_SIGNALS)[number];

/** Every signal the manager observes, in the order thresholds are listed and acted on. */
export type Signal = ConfigSignal | "allocatableMemory.available" | "memory.stall";

/** What reclaiming a signal frees: the eviction message's "low on resource" name. */
export type Resource = "memory" | "ephemeral-storage" | "inodes" | "pids";

export const SIGNAL_RESOURCE: Readonly<Record<Signal, Resource>> = Object.freeze({
  "memory.available": "memory",
  "allocatableMemory.available": "memory",
  "memory.stall": "memory",
  "nodefs.available": "ephemeral-storage",
  "nodefs.inodesFree": "inodes",
  "imagefs.available": "ephemeral-storage",
  "imagefs.inodesFree": "inodes",
  "pid.available": "pids",
});

/** The pressure condition each signal's met threshold sets. */
export type PressureCondition = Extract<
  NodeConditionType,
  "MemoryPressure" | "DiskPressure" | "PIDPressure"
>;

export const SIGNAL_CONDITION: Readonly<Record<Signal, PressureCondition>> = Object.freeze({
  "memory.available": "MemoryPressure",
  "allocatableMemory.available": "MemoryPressure",
  "memory.stall": "MemoryPressure",
  "nodefs.available": "DiskPressure",
  "nodefs.inodesFree": "DiskPressure",
  "imagefs.available": "DiskPressure",
  "imagefs.inodesFree": "DiskPressure",
  "pid.available": "PIDPressure",
});

const BYTE_SIGNALS: ReadonlySet<Signal> = new Set<Signal>([
  "memory.available",
  "allocatableMemory.available",
  "nodefs.available",
  "imagefs.available",
]);

/** Signals counted in bytes (printed as binary quantities); the others are counts. */
export function isByteSignal(signal: Signal): boolean {
  return BYTE_SIGNALS.has(signal);
}

export function isMemorySignal(signal: Signal): boolean {
  return SIGNAL_RESOURCE[signal] === "memory";
}

/** One reading of a signal. For `memory.stall`, `available` is the stall percentage (0-100)
 * and `capacity` 100: the threshold is met when it is at or above the limit. */
export interface Observation {
  available: number;
  capacity: number;
}

export type Observations = ReadonlyMap<Signal, Observation>;
