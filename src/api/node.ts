// Kubernetes core/v1 Node, the subset fleetlet reports: capacity, allocatable, conditions,
// addresses and nodeInfo. Field names and spelling follow the upstream JSON.
import type { ConditionStatus, ObjectMeta, ResourceList, Time } from "./types.ts";

export type NodeConditionType = "Ready" | "MemoryPressure" | "DiskPressure" | "PIDPressure";

export interface NodeCondition {
  type: NodeConditionType;
  status: ConditionStatus;
  /** When the agent last posted this condition. */
  lastHeartbeatTime?: Time;
  /** When `status` last changed. */
  lastTransitionTime?: Time;
  reason?: string;
  message?: string;
}

type NodeAddressType = "InternalIP" | "ExternalIP" | "Hostname";

interface NodeAddress {
  type: NodeAddressType;
  address: string;
}

interface NodeSystemInfo {
  machineID: string;
  systemUUID: string;
  bootID: string;
  kernelVersion: string;
  osImage: string;
  /** e.g. "containerd://1.6.20"; empty until the runtime has answered. */
  containerRuntimeVersion: string;
  /** "fleetlet/<version>". */
  kubeletVersion: string;
  kubeProxyVersion: string;
  operatingSystem: string;
  architecture: string;
}

/** An image present on the node. */
export interface ContainerImage {
  /** Up to 5 names: repo digests, then tags. */
  names: string[];
  sizeBytes: number;
}

interface NodeStatus {
  capacity?: ResourceList;
  allocatable?: ResourceList;
  conditions?: NodeCondition[];
  addresses?: NodeAddress[];
  nodeInfo?: NodeSystemInfo;
  /** The largest images on the node (nodeStatusMaxImages, 50 by default). */
  images?: ContainerImage[];
}

interface NodeSpec {
  unschedulable?: boolean;
}

export interface Node {
  apiVersion: "v1";
  kind: "Node";
  metadata: ObjectMeta;
  spec: NodeSpec;
  status: NodeStatus;
}

/** coordination.k8s.io/v1 Lease: a node's heartbeat, as the kubelet keeps it. */
export interface Lease {
  apiVersion: "coordination.k8s.io/v1";
  kind: "Lease";
  metadata: ObjectMeta;
  spec: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    /** MicroTime: RFC 3339 with microseconds. */
    renewTime?: string;
  };
}
