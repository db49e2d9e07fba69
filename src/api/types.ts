// Kubernetes core/v1 shapes for the subset fleetlet supports. Field names, spelling and
// optionality follow the upstream JSON; an absent field means "not set" (defaults.ts fills the
// ones the API server would). Quantities are kept as the user wrote them (see quantity.ts).
// Volumes, env sources, ConfigMaps and Secrets are in types-config.ts.

import type { EnvFromSource, EnvVarSource, LocalObjectReference, Volume } from "./types-config.ts";

export type * from "./types-config.ts";

import type { Affinity } from "./affinity.ts";

/** A map of resource name ("cpu", "memory", "ephemeral-storage", ...) to a quantity string. */
export type ResourceList = Record<string, string>;

/** A port given either by number or by the name of a container port. */
export type IntOrString = number | string;

type Protocol = "TCP" | "UDP" | "SCTP";
export type RestartPolicy = "Always" | "OnFailure" | "Never";
/** Per-container restart policy; only "Always" exists, for sidecar init containers. */
type ContainerRestartPolicy = "Always";
export type PullPolicy = "Always" | "IfNotPresent" | "Never";
type DNSPolicy = "ClusterFirstWithHostNet" | "ClusterFirst" | "Default" | "None";
type TerminationMessagePolicy = "File" | "FallbackToLogsOnError";
type URIScheme = "HTTP" | "HTTPS";
export type PodPhase = "Pending" | "Running" | "Succeeded" | "Failed" | "Unknown";
export type PodQOSClass = "Guaranteed" | "Burstable" | "BestEffort";
export type ConditionStatus = "True" | "False" | "Unknown";
export type PodConditionType =
  | "PodScheduled"
  | "PodReadyToStartContainers"
  | "Initialized"
  | "ContainersReady"
  | "Ready"
  | "DisruptionTarget";
export type EventType = "Normal" | "Warning";

/** RFC 3339 timestamp in UTC with second precision, e.g. "2024-05-01T10:00:00Z". */
export type Time = string;

export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  creationTimestamp?: Time;
  /** Set once the pod is being deleted; the pod then only terminates. */
  deletionTimestamp?: Time;
  deletionGracePeriodSeconds?: number;
  generation?: number;
  resourceVersion?: string;
  ownerReferences?: OwnerReference[];
}

export interface ObjectReference {
  kind?: string;
  namespace?: string;
  name?: string;
  uid?: string;
  apiVersion?: string;
  resourceVersion?: string;
  /** e.g. "spec.containers{web}" when the event is about one container. */
  fieldPath?: string;
}

interface ListMeta {
  resourceVersion?: string;
  continue?: string;
}

/** The object that owns this one (a hub pod's DaemonSet). */
export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

// ---- Containers ----

export interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: EnvVarSource;
}

export interface ContainerPort {
  name?: string;
  containerPort: number;
  hostPort?: number;
  protocol?: Protocol;
  hostIP?: string;
}

export interface ResourceRequirements {
  requests?: ResourceList;
  limits?: ResourceList;
}

export interface VolumeMount {
  name: string;
  mountPath: string;
  readOnly?: boolean;
  subPath?: string;
  /** Like subPath, with $(VAR) references to the container's environment expanded. */
  subPathExpr?: string;
}

export interface ExecAction {
  command?: string[];
}

interface HTTPHeader {
  name: string;
  value: string;
}

export interface HTTPGetAction {
  path?: string;
  port: IntOrString;
  host?: string;
  scheme?: URIScheme;
  httpHeaders?: HTTPHeader[];
}

export interface TCPSocketAction {
  port: IntOrString;
  host?: string;
}

interface GRPCAction {
  port: number;
  service?: string;
}

interface SleepAction {
  seconds: number;
}

/** What a probe runs; exactly one field is set. */
interface ProbeHandler {
  exec?: ExecAction;
  httpGet?: HTTPGetAction;
  tcpSocket?: TCPSocketAction;
  grpc?: GRPCAction;
}

export interface Probe extends ProbeHandler {
  initialDelaySeconds?: number;
  timeoutSeconds?: number;
  periodSeconds?: number;
  successThreshold?: number;
  failureThreshold?: number;
  terminationGracePeriodSeconds?: number;
}

/** What a lifecycle hook runs; exactly one field is set. */
export interface LifecycleHandler {
  exec?: ExecAction;
  httpGet?: HTTPGetAction;
  tcpSocket?: TCPSocketAction;
  sleep?: SleepAction;
}

export interface Lifecycle {
  postStart?: LifecycleHandler;
  preStop?: LifecycleHandler;
}

interface Capabilities {
  add?: string[];
  drop?: string[];
}

export interface SecurityContext {
  runAsUser?: number;
  runAsGroup?: number;
  runAsNonRoot?: boolean;
  privileged?: boolean;
  capabilities?: Capabilities;
  readOnlyRootFilesystem?: boolean;
  allowPrivilegeEscalation?: boolean;
}

export interface Container {
  name: string;
  image: string;
  imagePullPolicy?: PullPolicy;
  command?: string[];
  args?: string[];
  workingDir?: string;
  env?: EnvVar[];
  /** Variables from every key of a ConfigMap or Secret; `env` overrides them. */
  envFrom?: EnvFromSource[];
  ports?: ContainerPort[];
  resources?: ResourceRequirements;
  volumeMounts?: VolumeMount[];
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  startupProbe?: Probe;
  lifecycle?: Lifecycle;
  securityContext?: SecurityContext;
  terminationMessagePath?: string;
  terminationMessagePolicy?: TerminationMessagePolicy;
  /** Only on init containers: "Always" makes it a sidecar that runs beside the app. */
  restartPolicy?: ContainerRestartPolicy;
  stdin?: boolean;
  stdinOnce?: boolean;
  tty?: boolean;
}

// ---- Pod spec ----

interface PodDNSConfigOption {
  name: string;
  value?: string;
}

export interface PodDNSConfig {
  nameservers?: string[];
  searches?: string[];
  options?: PodDNSConfigOption[];
}

interface Sysctl {
  name: string;
  value: string;
}

interface PodSecurityContext {
  runAsUser?: number;
  runAsGroup?: number;
  runAsNonRoot?: boolean;
  fsGroup?: number;
  supplementalGroups?: number[];
  sysctls?: Sysctl[];
}

export interface PodSpec {
  containers: Container[];
  initContainers?: Container[];
  restartPolicy?: RestartPolicy;
  terminationGracePeriodSeconds?: number;
  activeDeadlineSeconds?: number;
  hostNetwork?: boolean;
  hostPID?: boolean;
  hostIPC?: boolean;
  hostname?: string;
  subdomain?: string;
  dnsPolicy?: DNSPolicy;
  dnsConfig?: PodDNSConfig;
  nodeName?: string;
  nodeSelector?: Record<string, string>;
  affinity?: Affinity;
  volumes?: Volume[];
  /** Secrets (kubernetes.io/dockerconfigjson) whose credentials pull this pod's images. */
  imagePullSecrets?: LocalObjectReference[];
  securityContext?: PodSecurityContext;
  priority?: number;
  priorityClassName?: string;
  tolerations?: Toleration[];
}

/** A toleration of a node taint. On a device there are no taints; only admission under memory
 * pressure reads them (node.kubernetes.io/memory-pressure). */
export interface Toleration {
  key?: string;
  /** "Equal" (the default) or "Exists". */
  operator?: string;
  value?: string;
  /** "NoSchedule", "PreferNoSchedule" or "NoExecute"; empty matches every effect. */
  effect?: string;
  tolerationSeconds?: number;
}

// ---- Pod status ----

export interface PodCondition {
  type: PodConditionType;
  status: ConditionStatus;
  lastProbeTime?: Time;
  lastTransitionTime?: Time;
  reason?: string;
  message?: string;
}

interface PodIP {
  ip: string;
}

interface ContainerStateWaiting {
  /** e.g. "ContainerCreating", "CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull". */
  reason?: string;
  message?: string;
}

interface ContainerStateRunning {
  startedAt?: Time;
}

interface ContainerStateTerminated {
  exitCode: number;
  signal?: number;
  /** e.g. "Completed", "Error", "OOMKilled". */
  reason?: string;
  message?: string;
  startedAt?: Time;
  finishedAt?: Time;
  containerID?: string;
}

/** At most one field is set; none set means waiting with no reason. */
export interface ContainerState {
  waiting?: ContainerStateWaiting;
  running?: ContainerStateRunning;
  terminated?: ContainerStateTerminated;
}

export interface ContainerStatus {
  name: string;
  state: ContainerState;
  lastState: ContainerState;
  ready: boolean;
  restartCount: number;
  image: string;
  imageID: string;
  /** "<runtime>://<id>", e.g. "containerd://4f1e..."; absent before the first start. */
  containerID?: string;
  started?: boolean;
  /** The devices it holds per extended resource, with their health (as in Kubernetes). */
  allocatedResourcesStatus?: ResourceStatus[];
}

export interface ResourceStatus {
  /** The extended resource, e.g. "fleetlet.io/serial". */
  name: string;
  resources?: { resourceID: string; health?: "Healthy" | "Unhealthy" | "Unknown" }[];
}

export interface PodStatus {
  phase?: PodPhase;
  conditions?: PodCondition[];
  message?: string;
  /** e.g. "Evicted", "DeadlineExceeded". */
  reason?: string;
  hostIP?: string;
  hostIPs?: PodIP[];
  podIP?: string;
  podIPs?: PodIP[];
  startTime?: Time;
  qosClass?: PodQOSClass;
  initContainerStatuses?: ContainerStatus[];
  containerStatuses?: ContainerStatus[];
}

export interface Pod {
  apiVersion: "v1";
  kind: "Pod";
  metadata: ObjectMeta;
  spec: PodSpec;
  status?: PodStatus;
}

export interface PodList {
  apiVersion: "v1";
  kind: "PodList";
  metadata: ListMeta;
  items: Pod[];
}

// ---- Events ----

interface EventSource {
  component?: string;
  host?: string;
}

export interface Event {
  apiVersion: "v1";
  kind: "Event";
  metadata: ObjectMeta;
  involvedObject: ObjectReference;
  /** UpperCamelCase, machine readable, e.g. "Pulled", "BackOff", "Unhealthy". */
  reason: string;
  message: string;
  type: EventType;
  source: EventSource;
  /** How many times this event (same object, reason and message) was seen. */
  count: number;
  firstTimestamp: Time;
  lastTimestamp: Time;
}

export interface EventList {
  apiVersion: "v1";
  kind: "EventList";
  metadata: ListMeta;
  items: Event[];
}
