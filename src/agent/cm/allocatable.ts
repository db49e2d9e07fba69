// Node capacity and allocatable, as kubelet computes them: allocatable = capacity −
// systemReserved − kubeReserved − the hard eviction threshold (memory.available for memory,
// nodefs.available for ephemeral-storage), never below 0. Pods are not reduced by eviction.
// Process IDs are reserved too (`pid`): the pods' top cgroup gets pids.max = the node's largest
// PID count (min of kernel.pid_max and kernel.threads-max, as the kubelet reads it) less them.
import { cpuToMilli, memoryToBytes } from "../../api/index.ts";
import type { ResourceList } from "../../api/types.ts";
import { checkThresholdValue, thresholdQuantity } from "../evictionapi/thresholds.ts";
import type { Amounts } from "./pod-resources.ts";

export interface NodeResources extends Amounts {
  pods: number;
  /** How many processes the node can hold (undefined when it could not be read). */
  pid?: number;
}

/** What systemReserved or kubeReserved holds back: the amounts, and `pid` process IDs. */
export interface Reservation extends Amounts {
  pid?: number;
}

/** Parses a reservation (systemReserved, kubeReserved); throws naming the field and value. */
export function parseReservation(list: ResourceList | undefined, field: string): Reservation {
  const out: Reservation = { cpu: 0, memory: 0, ephemeralStorage: 0, pid: 0 };
  for (const [name, value] of Object.entries(list ?? {})) {
    const at = `${field}.${name}`;
    const n = parseAmount(String(value), name === "cpu" ? cpuToMilli : memoryToBytes, at);
    if (name === "cpu") out.cpu = n;
    else if (name === "memory") out.memory = n;
    else if (name === "ephemeral-storage") out.ephemeralStorage = n;
    else if (name === "pid") out.pid = Math.floor(n);
    else throw new Error(`${at}: unknown resource ${JSON.stringify(name)}`);
  }
  return out;
}

function parseAmount(text: string, convert: (q: string) => number, at: string): number {
  let n: number;
  try {
    n = convert(text);
  } catch {
    throw new Error(`${at}: ${JSON.stringify(text)} is not a quantity`);
  }
  if (n < 0) throw new Error(`${at}: ${JSON.stringify(text)} must not be negative`);
  return n;
}

/** A hard threshold ("100Mi" or "10%") in bytes of `capacity`, 0 when it is off ("0%",
 * "100%"), as the kubelet's hardEvictionReservation; throws naming the signal and value. */
export function thresholdBytes(signal: string, value: string, capacity: number): number {
  const checked = checkThresholdValue(value);
  if ("error" in checked)
    throw new Error(`evictionHard.${signal}: ${JSON.stringify(value)} ${checked.error}`);
  return checked.value === undefined ? 0 : thresholdQuantity(checked.value, capacity);
}

export interface AllocatableInput {
  capacity: NodeResources;
  systemReserved: Reservation;
  kubeReserved: Reservation;
  evictionHard: Readonly<Record<string, string>>;
}

export function computeAllocatable(input: AllocatableInput): NodeResources {
  const { capacity: cap, systemReserved: sys, kubeReserved: kube, evictionHard } = input;
  const memEviction =
    evictionHard["memory.available"] === undefined
      ? 0
      : thresholdBytes("memory.available", evictionHard["memory.available"], cap.memory);
  const fsEviction =
    evictionHard["nodefs.available"] === undefined
      ? 0
      : thresholdBytes("nodefs.available", evictionHard["nodefs.available"], cap.ephemeralStorage);
  const minus = (...xs: number[]) =>
    Math.max(
      0,
      xs.reduce((a, b) => a - b),
    );
  return {
    cpu: minus(cap.cpu, sys.cpu, kube.cpu),
    memory: minus(cap.memory, sys.memory, kube.memory, memEviction),
    ephemeralStorage: minus(
      cap.ephemeralStorage,
      sys.ephemeralStorage,
      kube.ephemeralStorage,
      fsEviction,
    ),
    pods: cap.pods,
  };
}

/**
 * What the pods' top cgroup (kubepods) gets, as kubelet enforces allocatable for pods:
 * capacity minus the reservations (not the eviction threshold), as shares, memory limit and, when
 * the node's PID count is known, pids limit.
 */
export function podsCgroupLimits(input: AllocatableInput): {
  cpuMilli: number;
  memory: number;
  pids?: number;
} {
  const { capacity: cap, systemReserved: sys, kubeReserved: kube } = input;
  const limits = {
    cpuMilli: Math.max(0, cap.cpu - sys.cpu - kube.cpu),
    memory: Math.max(0, cap.memory - sys.memory - kube.memory),
  };
  if (cap.pid === undefined) return limits;
  return { ...limits, pids: Math.max(0, cap.pid - (sys.pid ?? 0) - (kube.pid ?? 0)) };
}

/** As a node's status shows it: cpu in millicores, memory in Ki, storage in bytes, pods. */
export function toResourceList(r: NodeResources): Record<string, string> {
  return {
    cpu: r.cpu % 1000 === 0 ? String(r.cpu / 1000) : `${r.cpu}m`,
    memory: `${Math.floor(r.memory / 1024)}Ki`,
    "ephemeral-storage": String(r.ephemeralStorage),
    pods: String(r.pods),
  };
}
