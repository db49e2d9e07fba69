// The CRI v1 messages fleetlet uses, as @grpc/proto-loader hands them to us and takes them from
// us: camelCase field names, int64/uint64 as JS numbers, enums as their string names, bytes as
// Uint8Array (a Buffer when it comes from the wire).
//
// Invariants:
// - Request types have optional fields: an absent field is sent as the proto3 default.
// - Response types have every field present (proto-loader `defaults: true`): scalars default to
//   0/""/false, lists to [], maps to {}, and an absent nested message is `null`.
// - Timestamps (`createdAt`, `startedAt`, `finishedAt`, stats `timestamp`) are nanoseconds since
//   the Unix epoch. As numbers they keep about 0.25 µs of precision, which is enough for us.
// - Durations in requests (`StopContainerRequest.timeout`, `ExecSyncRequest.timeout`) are seconds.

export type Labels = Record<string, string>;

export type PodSandboxState = "SANDBOX_READY" | "SANDBOX_NOTREADY";
export type ContainerState =
  | "CONTAINER_CREATED"
  | "CONTAINER_RUNNING"
  | "CONTAINER_EXITED"
  | "CONTAINER_UNKNOWN";
type NamespaceMode = "POD" | "CONTAINER" | "NODE" | "TARGET";
type Protocol = "TCP" | "UDP" | "SCTP";
type MountPropagation =
  | "PROPAGATION_PRIVATE"
  | "PROPAGATION_HOST_TO_CONTAINER"
  | "PROPAGATION_BIDIRECTIONAL";
type SecurityProfileType = "RuntimeDefault" | "Unconfined" | "Localhost";
type SupplementalGroupsPolicy = "Merge" | "Strict";

// ---- values shared by requests and responses ----

interface Int64Value {
  value: number;
}
interface UInt64Value {
  value: number;
}
export interface ImageSpec {
  image: string;
  annotations?: Labels;
  userSpecifiedImage?: string;
  runtimeHandler?: string;
  imageRef?: string;
}
interface IDMapping {
  hostId: number;
  containerId: number;
  length: number;
}
export interface NamespaceOption {
  network?: NamespaceMode;
  pid?: NamespaceMode;
  ipc?: NamespaceMode;
  /** Container whose namespace is joined when a mode is TARGET. */
  targetId?: string;
  usernsOptions?: { mode?: NamespaceMode; uids?: IDMapping[]; gids?: IDMapping[] } | null;
}
interface SELinuxOption {
  user?: string;
  role?: string;
  type?: string;
  level?: string;
}
interface SecurityProfile {
  profileType?: SecurityProfileType;
  /** Path or name of the profile when profileType is Localhost. */
  localhostRef?: string;
}
interface HugepageLimit {
  pageSize: string;
  limit: number;
}
/** A zero (or absent) field means "not set" to the runtime. */
export interface LinuxContainerResources {
  cpuPeriod?: number;
  cpuQuota?: number;
  cpuShares?: number;
  memoryLimitInBytes?: number;
  oomScoreAdj?: number;
  cpusetCpus?: string;
  cpusetMems?: string;
  hugepageLimits?: HugepageLimit[];
  /** cgroup v2 files to write, e.g. {"memory.high": "..."}. */
  unified?: Labels;
  memorySwapLimitInBytes?: number;
}
interface PodSandboxMetadata {
  name: string;
  uid: string;
  namespace: string;
  attempt: number;
}
interface ContainerMetadata {
  name: string;
  attempt: number;
}
export interface KeyValue {
  key: string;
  value: string;
}
export interface Mount {
  containerPath: string;
  hostPath: string;
  readonly?: boolean;
  selinuxRelabel?: boolean;
  propagation?: MountPropagation;
  uidMappings?: IDMapping[];
  gidMappings?: IDMapping[];
  recursiveReadOnly?: boolean;
}

// ---- pod sandbox config ----

export interface DNSConfig {
  servers?: string[];
  searches?: string[];
  options?: string[];
}
export interface PortMapping {
  protocol?: Protocol;
  containerPort: number;
  hostPort?: number;
  hostIp?: string;
}
export interface LinuxSandboxSecurityContext {
  namespaceOptions?: NamespaceOption | null;
  selinuxOptions?: SELinuxOption | null;
  runAsUser?: Int64Value | null;
  runAsGroup?: Int64Value | null;
  readonlyRootfs?: boolean;
  supplementalGroups?: number[];
  supplementalGroupsPolicy?: SupplementalGroupsPolicy;
  privileged?: boolean;
  seccomp?: SecurityProfile | null;
  apparmor?: SecurityProfile | null;
}
interface LinuxPodSandboxConfig {
  cgroupParent?: string;
  securityContext?: LinuxSandboxSecurityContext | null;
  sysctls?: Labels;
  overhead?: LinuxContainerResources | null;
  resources?: LinuxContainerResources | null;
}
export interface PodSandboxConfig {
  metadata: PodSandboxMetadata;
  hostname?: string;
  /** Folder under which the runtime's container log paths (ContainerConfig.logPath) are joined. */
  logDirectory?: string;
  dnsConfig?: DNSConfig | null;
  portMappings?: PortMapping[];
  labels?: Labels;
  annotations?: Labels;
  linux?: LinuxPodSandboxConfig | null;
}

// ---- container config ----

interface Capability {
  addCapabilities?: string[];
  dropCapabilities?: string[];
  addAmbientCapabilities?: string[];
}
export interface LinuxContainerSecurityContext {
  capabilities?: Capability | null;
  privileged?: boolean;
  namespaceOptions?: NamespaceOption | null;
  selinuxOptions?: SELinuxOption | null;
  runAsUser?: Int64Value | null;
  runAsGroup?: Int64Value | null;
  runAsUsername?: string;
  readonlyRootfs?: boolean;
  supplementalGroups?: number[];
  supplementalGroupsPolicy?: SupplementalGroupsPolicy;
  noNewPrivs?: boolean;
  maskedPaths?: string[];
  readonlyPaths?: string[];
  seccomp?: SecurityProfile | null;
  apparmor?: SecurityProfile | null;
}
interface Device {
  containerPath: string;
  hostPath: string;
  /** cgroup device permissions: some of "r", "w", "m". */
  permissions: string;
}
export interface ContainerConfig {
  metadata: ContainerMetadata;
  image: ImageSpec;
  command?: string[];
  args?: string[];
  workingDir?: string;
  envs?: KeyValue[];
  mounts?: Mount[];
  devices?: Device[];
  labels?: Labels;
  annotations?: Labels;
  /** Relative to the sandbox's logDirectory. */
  logPath?: string;
  stdin?: boolean;
  stdinOnce?: boolean;
  tty?: boolean;
  linux?: {
    resources?: LinuxContainerResources | null;
    securityContext?: LinuxContainerSecurityContext | null;
  } | null;
  /** Fully qualified CDI device names, for runtimes that resolve CDI (containerd 1.7+). */
  CDIDevices?: { name: string }[];
}

// ---- objects the runtime reports ----

export interface PodSandbox {
  id: string;
  metadata: PodSandboxMetadata | null;
  state: PodSandboxState;
  createdAt: number;
  labels: Labels;
  annotations: Labels;
  runtimeHandler: string;
}
export interface PodSandboxStatus extends PodSandbox {
  network: { ip: string; additionalIps: { ip: string }[] } | null;
  linux: { namespaces: { options: NamespaceOption | null } | null } | null;
}
export interface Container {
  id: string;
  podSandboxId: string;
  metadata: ContainerMetadata | null;
  image: ImageSpec | null;
  imageRef: string;
  /** Present in newer runtimes; "" from containerd 1.6. */
  imageId: string;
  state: ContainerState;
  createdAt: number;
  labels: Labels;
  annotations: Labels;
}
export interface ContainerStatus {
  id: string;
  metadata: ContainerMetadata | null;
  state: ContainerState;
  createdAt: number;
  /** 0 until started. */
  startedAt: number;
  /** 0 until exited. */
  finishedAt: number;
  exitCode: number;
  image: ImageSpec | null;
  imageRef: string;
  imageId: string;
  /** Machine-readable, e.g. "Completed", "Error", "OOMKilled". */
  reason: string;
  message: string;
  labels: Labels;
  annotations: Labels;
  mounts: Mount[];
  logPath: string;
  resources: { linux: LinuxContainerResources | null } | null;
  user: { linux: { uid: number; gid: number; supplementalGroups: number[] } | null } | null;
}
export interface Image {
  id: string;
  repoTags: string[];
  repoDigests: string[];
  size: number;
  uid: Int64Value | null;
  username: string;
  spec: ImageSpec | null;
  pinned: boolean;
}
export interface RuntimeCondition {
  /** "RuntimeReady" or "NetworkReady" (containerd), or runtime-specific. */
  type: string;
  status: boolean;
  reason: string;
  message: string;
}
export interface FilesystemUsage {
  timestamp: number;
  fsId: { mountpoint: string } | null;
  usedBytes: UInt64Value | null;
  inodesUsed: UInt64Value | null;
}
interface PsiData {
  Total: number;
  Avg10: number;
  Avg60: number;
  Avg300: number;
}
interface PsiStats {
  Full: PsiData | null;
  Some: PsiData | null;
}
interface CpuUsage {
  timestamp: number;
  usageCoreNanoSeconds: UInt64Value | null;
  usageNanoCores: UInt64Value | null;
  psi: PsiStats | null;
}
interface MemoryUsage {
  timestamp: number;
  workingSetBytes: UInt64Value | null;
  availableBytes: UInt64Value | null;
  usageBytes: UInt64Value | null;
  rssBytes: UInt64Value | null;
  pageFaults: UInt64Value | null;
  majorPageFaults: UInt64Value | null;
  psi: PsiStats | null;
}
export interface ContainerStats {
  attributes: {
    id: string;
    metadata: ContainerMetadata | null;
    labels: Labels;
    annotations: Labels;
  } | null;
  cpu: CpuUsage | null;
  memory: MemoryUsage | null;
  writableLayer: FilesystemUsage | null;
  swap: {
    timestamp: number;
    swapAvailableBytes: UInt64Value | null;
    swapUsageBytes: UInt64Value | null;
  } | null;
  io: { timestamp: number; psi: PsiStats | null } | null;
}
interface NetworkInterfaceUsage {
  name: string;
  rxBytes: UInt64Value | null;
  rxErrors: UInt64Value | null;
  txBytes: UInt64Value | null;
  txErrors: UInt64Value | null;
}
export interface PodSandboxStats {
  attributes: {
    id: string;
    metadata: PodSandboxMetadata | null;
    labels: Labels;
    annotations: Labels;
  } | null;
  linux: {
    cpu: CpuUsage | null;
    memory: MemoryUsage | null;
    network: {
      timestamp: number;
      defaultInterface: NetworkInterfaceUsage | null;
      interfaces: NetworkInterfaceUsage[];
    } | null;
    process: { timestamp: number; processCount: UInt64Value | null } | null;
    containers: ContainerStats[];
    io: { timestamp: number; psi: PsiStats | null } | null;
  } | null;
}

export type * from "./requests.ts";
export type * from "./service.ts";
