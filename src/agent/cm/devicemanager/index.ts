// The device manager (the kubelet's cm/devicemanager): extended resources served by device
// plugins registered on kubelet.sock in the device plugin folder, and by host devices declared in
// the agent's config. Pods ask for them in their containers' limits; the manager counts them at
// admission, allocates them before the pod's containers start (a plugin's Allocate answer goes
// into the container's CRI config), checkpoints what each container holds, and frees the devices
// of pods that are gone. docs/devices.md describes it for users.
import type { Container, Pod, ResourceStatus } from "../../../api/types.ts";
import type { AdmitFailure } from "../../lifecycle/index.ts";
import type { ContainerAllocation } from "./types.ts";

export type {
  ContainerAllocation,
  DevicePluginEndpoint,
  PluginDevice,
  PluginOptions,
} from "./types.ts";

/** Where a pod's devices stand before its containers may start. */
export type DevicePreparation =
  | { state: "ready" }
  /** A resource the pod asks for is known (checkpoint, host device group) but its plugin has not
   * registered yet: the pod stays Pending with this reason and message, and is synced again. */
  | { state: "waiting"; reason: string; message: string }
  /** The pod cannot get its devices (the kubelet's admission failure): it ends Failed. */
  | { state: "failed"; reason: string; message: string };

/** Figures for the metrics endpoint. */
export interface DeviceStats {
  /** Per resource: whether its plugin is registered now, devices listed, healthy, allocated. */
  resources: {
    resourceName: string;
    registered: boolean;
    devices: number;
    healthy: number;
    allocated: number;
  }[];
  /** Allocate calls made, and those that failed. */
  allocations: number;
  allocationFailures: number;
}

export interface DeviceManager {
  /** Admission (the kubelet's allocate admit handler, run in the sync loop, never blocking):
   * undefined when the pod may run beside the `active` pods, else the kubelet's failure
   * (UnexpectedAdmissionError "... Requested: N, Available: M, which is unexpected", or
   * OutOf<resource> for a resource nobody serves). A resource whose plugin is known but not
   * registered passes here and waits in prepare(). */
  admit(pod: Pod, active: readonly Pod[]): AdmitFailure | undefined;
  /** Before the pod's containers start (pod worker): allocates the devices of every container
   * that has none yet (GetPreferredAllocation, Allocate) and checkpoints them. */
  prepare(pod: Pod, signal?: AbortSignal): Promise<DevicePreparation>;
  /** What the container's devices need in its CRI config (every resource's Allocate answer
   * merged), after PreStartContainer where a plugin requires it; undefined when it has no
   * devices. Throws with a message naming the plugin when PreStartContainer fails. */
  containerOptions(
    pod: Pod,
    container: Container,
    signal?: AbortSignal,
  ): Promise<ContainerAllocation | undefined>;
  /** The device ids each resource gave a container, for `describe pod`. */
  containerDevices(podUid: string, containerName: string): Record<string, string[]>;
  /** The devices a container holds with their health, for its status. */
  resourceStatus(podUid: string, containerName: string): ResourceStatus[];
  /** Frees the devices of every pod not in `activeUids` (terminated or gone). */
  removeStale(activeUids: ReadonlySet<string>): void;
  /** Node capacity (every device) and allocatable (healthy ones) per resource name. */
  capacity(): Record<string, number>;
  allocatable(): Record<string, number>;
  stats(): DeviceStats;
  /** Calls `listener` whenever capacity or allocatable may have changed, or a waiting pod may
   * go on (a plugin registered); returns the function that removes it. */
  onChange(listener: () => void): () => void;
  /** Serves Registration on kubelet.sock and watches host devices until `signal` aborts. */
  run(signal: AbortSignal): Promise<void>;
}
