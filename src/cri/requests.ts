// Request and response messages of the CRI RPCs fleetlet calls (see types.ts for the
// conventions: optional request fields, fully present response fields, ns timestamps).

import type {
  Container,
  ContainerConfig,
  ContainerState,
  ContainerStats,
  ContainerStatus,
  FilesystemUsage,
  Image,
  ImageSpec,
  Labels,
  LinuxContainerResources,
  PodSandbox,
  PodSandboxConfig,
  PodSandboxState,
  PodSandboxStats,
  PodSandboxStatus,
  RuntimeCondition,
} from "./types.ts";

// ---- runtime ----

export interface VersionRequest {
  /** The CRI version the caller speaks, e.g. "v1". */
  version?: string;
}
export interface VersionResponse {
  version: string;
  runtimeName: string;
  runtimeVersion: string;
  runtimeApiVersion: string;
}
export interface StatusRequest {
  verbose?: boolean;
}
export interface StatusResponse {
  status: { conditions: RuntimeCondition[] } | null;
  info: Labels;
  runtimeHandlers: { name: string; features: Record<string, boolean> | null }[];
  features: { supplementalGroupsPolicy: boolean } | null;
}
export type RuntimeConfigRequest = Record<string, never>;
export interface RuntimeConfigResponse {
  linux: { cgroupDriver: "SYSTEMD" | "CGROUPFS" } | null;
}

// ---- sandboxes ----

export interface RunPodSandboxRequest {
  config: PodSandboxConfig;
  runtimeHandler?: string;
}
export interface RunPodSandboxResponse {
  podSandboxId: string;
}
interface PodSandboxIdRequest {
  podSandboxId: string;
}
export type StopPodSandboxRequest = PodSandboxIdRequest;
export type RemovePodSandboxRequest = PodSandboxIdRequest;
export type EmptyResponse = Record<string, never>;
export interface PodSandboxStatusRequest {
  podSandboxId: string;
  verbose?: boolean;
}
export interface PodSandboxStatusResponse {
  status: PodSandboxStatus | null;
  info: Labels;
  /** Only from runtimes with evented PLEG support; [] from containerd 1.6. */
  containersStatuses: ContainerStatus[];
  timestamp: number;
}
interface PodSandboxFilter {
  id?: string;
  state?: { state: PodSandboxState } | null;
  labelSelector?: Labels;
}
export interface ListPodSandboxRequest {
  filter?: PodSandboxFilter | null;
}
export interface ListPodSandboxResponse {
  items: PodSandbox[];
}

// ---- containers ----

export interface CreateContainerRequest {
  podSandboxId: string;
  config: ContainerConfig;
  sandboxConfig: PodSandboxConfig;
}
export interface CreateContainerResponse {
  containerId: string;
}
interface ContainerIdRequest {
  containerId: string;
}
export type StartContainerRequest = ContainerIdRequest;
export type RemoveContainerRequest = ContainerIdRequest;
export type ReopenContainerLogRequest = ContainerIdRequest;
export type ContainerStatsRequest = ContainerIdRequest;
export interface StopContainerRequest {
  containerId: string;
  /** Grace period in seconds before SIGKILL; 0 kills at once. */
  timeout?: number;
}
interface ContainerFilter {
  id?: string;
  state?: { state: ContainerState } | null;
  podSandboxId?: string;
  labelSelector?: Labels;
}
export interface ListContainersRequest {
  filter?: ContainerFilter | null;
}
export interface ListContainersResponse {
  containers: Container[];
}
export interface ContainerStatusRequest {
  containerId: string;
  verbose?: boolean;
}
export interface ContainerStatusResponse {
  status: ContainerStatus | null;
  info: Labels;
}
export interface UpdateContainerResourcesRequest {
  containerId: string;
  linux?: LinuxContainerResources | null;
  annotations?: Labels;
}
export interface ExecSyncRequest {
  containerId: string;
  cmd: string[];
  /** Seconds; 0 means the runtime applies no limit. */
  timeout?: number;
}
export interface ExecSyncResponse {
  stdout: Uint8Array;
  stderr: Uint8Array;
  exitCode: number;
}
/** Exec, Attach and PortForward answer with a URL of the runtime's streaming server. */
export interface StreamUrlResponse {
  url: string;
}
export interface ExecRequest {
  containerId: string;
  cmd: string[];
  tty?: boolean;
  stdin?: boolean;
  stdout?: boolean;
  /** Must be false with `tty` (the terminal merges both outputs). */
  stderr?: boolean;
}
export interface AttachRequest {
  containerId: string;
  stdin?: boolean;
  tty?: boolean;
  stdout?: boolean;
  stderr?: boolean;
}
export interface PortForwardRequest {
  podSandboxId: string;
  port?: number[];
}

// ---- stats ----

export interface ContainerStatsResponse {
  stats: ContainerStats | null;
}
export interface ListContainerStatsRequest {
  filter?: { id?: string; podSandboxId?: string; labelSelector?: Labels } | null;
}
export interface ListContainerStatsResponse {
  stats: ContainerStats[];
}
export type PodSandboxStatsRequest = PodSandboxIdRequest;
export interface PodSandboxStatsResponse {
  stats: PodSandboxStats | null;
}
export interface ListPodSandboxStatsRequest {
  filter?: { id?: string; labelSelector?: Labels } | null;
}
export interface ListPodSandboxStatsResponse {
  stats: PodSandboxStats[];
}

// ---- images ----

export interface AuthConfig {
  username?: string;
  password?: string;
  /** base64 of "username:password", as in a docker config.json. */
  auth?: string;
  serverAddress?: string;
  identityToken?: string;
  registryToken?: string;
}
export interface ListImagesRequest {
  filter?: { image?: ImageSpec | null } | null;
}
export interface ListImagesResponse {
  images: Image[];
}
export interface ImageStatusRequest {
  image: ImageSpec;
  verbose?: boolean;
}
export interface ImageStatusResponse {
  /** null when the image is not present (this is not an error). */
  image: Image | null;
  info: Labels;
}
export interface PullImageRequest {
  image: ImageSpec;
  auth?: AuthConfig | null;
  sandboxConfig?: PodSandboxConfig | null;
}
export interface PullImageResponse {
  /** The image's id (digest of its config), usable as ImageSpec.image afterwards. */
  imageRef: string;
}
export interface RemoveImageRequest {
  image: ImageSpec;
}
export type ImageFsInfoRequest = Record<string, never>;
export interface ImageFsInfoResponse {
  imageFilesystems: FilesystemUsage[];
  containerFilesystems: FilesystemUsage[];
}
