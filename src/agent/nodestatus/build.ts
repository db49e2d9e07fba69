// buildNode: the node object from its static facts and the agent's current state, as a pure
// function of (facts, state, now, previous). Conditions follow kubelet's rules: every update sets
// lastHeartbeatTime to now; lastTransitionTime changes only when a condition's status changes.
import type { ContainerImage, Node, NodeCondition, NodeConditionType } from "../../api/node.ts";
import type { ConditionStatus, ResourceList } from "../../api/types.ts";
import { formatTime } from "../events/index.ts";
import type { NodeFacts } from "./facts.ts";

/** What changes while the agent runs. */
export interface NodeState {
  runtimeHealthy: boolean;
  /** Why the runtime is not usable; shown in the Ready condition's message. */
  runtimeReasons: string[];
  /** "containerd://1.6.20", or "" until the runtime has answered. */
  runtimeVersion: string;
  /** Bytes of the root dir's filesystem; undefined when it could not be read. */
  ephemeralStorageBytes: number | undefined;
  /** Allocatable from the container manager (reserved and eviction thresholds subtracted);
   * undefined: allocatable = capacity. */
  allocatable?: ResourceList;
  /** Extended resources (the device manager): capacity counts every device, allocatable the
   * healthy ones; absent: none. */
  devices?: { capacity: ResourceList; allocatable: ResourceList };
  /** Pressure from the eviction manager; false when absent. */
  pressure?: { memory?: boolean; disk?: boolean; pid?: boolean };
  /** The images on the node (the image GC's list); absent until listed. */
  images?: ContainerImage[];
  /** The node's pressure stall information, by resource ("some avg10=0.00 ..."); absent where
   * the kernel has none. */
  psi?: Partial<Record<"memory" | "cpu" | "io", string>>;
}

export const CPU_MODEL_ANNOTATION = "fleetlet.io/cpu-model";
/** Node annotations with the node's PSI: fleetlet.io/psi-memory, -cpu, -io. They change all the
 * time, so a change of them alone is not worth a report (see nodeChanged). */
const PSI_ANNOTATION_PREFIX = "fleetlet.io/psi-";

/** Bytes as a binary quantity in Ki, as kubelet reports memory ("16303300Ki"). */
function kibibytes(bytes: number): string {
  return `${Math.floor(bytes / 1024)}Ki`;
}

function nodeCapacity(facts: NodeFacts, state: NodeState): ResourceList {
  const capacity: ResourceList = {
    cpu: String(facts.cpuCores),
    memory: kibibytes(facts.memoryBytes),
    pods: String(facts.maxPods),
  };
  if (state.ephemeralStorageBytes !== undefined) {
    capacity["ephemeral-storage"] = kibibytes(state.ephemeralStorageBytes);
  }
  return { ...capacity, ...state.devices?.capacity };
}

function nodeLabels(facts: NodeFacts): Record<string, string> {
  return {
    ...facts.configLabels,
    "kubernetes.io/hostname": facts.nodeName,
    "kubernetes.io/os": facts.operatingSystem,
    "kubernetes.io/arch": facts.architecture,
    "beta.kubernetes.io/os": facts.operatingSystem,
    "beta.kubernetes.io/arch": facts.architecture,
  };
}

interface Wanted {
  type: NodeConditionType;
  status: ConditionStatus;
  reason: string;
  message: string;
}

function wantedConditions(state: NodeState): Wanted[] {
  const p = state.pressure ?? {};
  const pressure = (
    type: NodeConditionType,
    on: boolean | undefined,
    yes: [string, string],
    no: [string, string],
  ): Wanted => {
    const [reason, message] = on ? yes : no;
    return { type, status: on ? "True" : "False", reason, message };
  };
  const ready: Wanted = state.runtimeHealthy
    ? {
        type: "Ready",
        status: "True",
        reason: "FleetletReady",
        message: "fleetlet is posting ready status",
      }
    : {
        type: "Ready",
        status: "False",
        reason: "FleetletNotReady",
        message: state.runtimeReasons.join("; ") || "container runtime is not healthy",
      };
  return [
    pressure(
      "MemoryPressure",
      p.memory,
      ["FleetletHasInsufficientMemory", "fleetlet has insufficient memory available"],
      ["FleetletHasSufficientMemory", "fleetlet has sufficient memory available"],
    ),
    pressure(
      "DiskPressure",
      p.disk,
      ["FleetletHasDiskPressure", "fleetlet has disk pressure"],
      ["FleetletHasNoDiskPressure", "fleetlet has no disk pressure"],
    ),
    pressure(
      "PIDPressure",
      p.pid,
      ["FleetletHasInsufficientPID", "fleetlet has insufficient PID available"],
      ["FleetletHasSufficientPID", "fleetlet has sufficient PID available"],
    ),
    ready,
  ];
}

/** The conditions at `now`, keeping each transition time whose status did not change. */
function nodeConditions(
  state: NodeState,
  now: number,
  previous: readonly NodeCondition[] | undefined,
): NodeCondition[] {
  const at = formatTime(now);
  return wantedConditions(state).map((w) => {
    const old = previous?.find((c) => c.type === w.type);
    const transition =
      old !== undefined && old.status === w.status && old.lastTransitionTime !== undefined
        ? old.lastTransitionTime
        : at;
    return { ...w, lastHeartbeatTime: at, lastTransitionTime: transition };
  });
}

/** The v1 Node at `now`; `previous` (the last one built) keeps condition transition times. */
export function buildNode(
  facts: NodeFacts,
  state: NodeState,
  now: number,
  previous: Node | undefined,
): Node {
  const capacity = nodeCapacity(facts, state);
  const addresses = [
    { type: "InternalIP" as const, address: facts.hostIP },
    { type: "Hostname" as const, address: facts.hostname },
  ];
  const annotations: Record<string, string> = {};
  if (facts.cpuModel !== "") annotations[CPU_MODEL_ANNOTATION] = facts.cpuModel;
  for (const [resource, text] of Object.entries(state.psi ?? {}))
    annotations[`${PSI_ANNOTATION_PREFIX}${resource}`] = text;
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      name: facts.nodeName,
      labels: nodeLabels(facts),
      ...(Object.keys(annotations).length > 0 && { annotations }),
    },
    spec: {},
    status: {
      capacity,
      allocatable: { ...capacity, ...state.allocatable, ...state.devices?.allocatable },
      conditions: nodeConditions(state, now, previous?.status.conditions),
      addresses,
      nodeInfo: {
        machineID: facts.machineID,
        systemUUID: facts.systemUUID,
        bootID: facts.bootID,
        kernelVersion: facts.kernelVersion,
        osImage: facts.osImage,
        containerRuntimeVersion: state.runtimeVersion,
        kubeletVersion: facts.kubeletVersion,
        kubeProxyVersion: "",
        operatingSystem: facts.operatingSystem,
        architecture: facts.architecture,
      },
      ...(state.images !== undefined && { images: state.images }),
    },
  };
}

/** Whether two nodes differ in anything but heartbeat times and PSI (worth reporting now). */
export function nodeChanged(a: Node | undefined, b: Node): boolean {
  if (a === undefined) return true;
  const annotations = (n: Node) =>
    Object.fromEntries(
      Object.entries(n.metadata.annotations ?? {}).filter(
        ([k]) => !k.startsWith(PSI_ANNOTATION_PREFIX),
      ),
    );
  const strip = (n: Node) =>
    JSON.stringify({
      ...n,
      metadata: { ...n.metadata, annotations: annotations(n) },
      status: {
        ...n.status,
        conditions: n.status.conditions?.map(({ lastHeartbeatTime: _, ...c }) => c),
      },
    });
  return strip(a) !== strip(b);
}
