// The CRI runtime as fleetlet sees it: one method per RPC, the same interface for the real
// client (client.ts) and the in-memory fake (fake.ts).
//
// Every method rejects with a CriError (errors.ts) when the runtime answers with an error, the
// deadline passes, the signal aborts or the runtime cannot be reached.

import type * as m from "./requests.ts";

export interface CallOptions {
  /** Deadline for this call, replacing the client's default for the RPC. */
  timeoutMs?: number;
  /** Aborting cancels the call; it then rejects with a CriError of code "Cancelled". */
  signal?: AbortSignal;
}

interface RuntimeService {
  /** Runtime name and version, and the CRI version it speaks. Cheap: use it as a ping. */
  version(req: m.VersionRequest, opts?: CallOptions): Promise<m.VersionResponse>;
  /** Runtime conditions (RuntimeReady, NetworkReady). A reachable runtime may still be unready. */
  status(req: m.StatusRequest, opts?: CallOptions): Promise<m.StatusResponse>;
  /** The runtime's cgroup driver (containerd 2.0 and later); Unimplemented before. */
  runtimeConfig(req: m.RuntimeConfigRequest, opts?: CallOptions): Promise<m.RuntimeConfigResponse>;

  /** Creates and starts a sandbox (network namespace, pause process); ready when it resolves. */
  runPodSandbox(req: m.RunPodSandboxRequest, opts?: CallOptions): Promise<m.RunPodSandboxResponse>;
  /** Stops all containers of the sandbox and tears down its network. Idempotent. */
  stopPodSandbox(req: m.StopPodSandboxRequest, opts?: CallOptions): Promise<m.EmptyResponse>;
  /** Removes a stopped sandbox and its containers. Succeeds if it is already gone. */
  removePodSandbox(req: m.RemovePodSandboxRequest, opts?: CallOptions): Promise<m.EmptyResponse>;
  /** Status of one sandbox; NotFound if it does not exist. */
  podSandboxStatus(
    req: m.PodSandboxStatusRequest,
    opts?: CallOptions,
  ): Promise<m.PodSandboxStatusResponse>;
  /** Sandboxes matching every field set in the filter (labels: all must match). */
  listPodSandbox(
    req: m.ListPodSandboxRequest,
    opts?: CallOptions,
  ): Promise<m.ListPodSandboxResponse>;

  /** Creates a container in a ready sandbox; the image must be present. State CREATED. */
  createContainer(
    req: m.CreateContainerRequest,
    opts?: CallOptions,
  ): Promise<m.CreateContainerResponse>;
  /** Starts a CREATED container. */
  startContainer(req: m.StartContainerRequest, opts?: CallOptions): Promise<m.EmptyResponse>;
  /** Signals the container, waits up to `timeout` seconds, then kills. Idempotent. */
  stopContainer(req: m.StopContainerRequest, opts?: CallOptions): Promise<m.EmptyResponse>;
  /** Removes a container (a running one is killed first). Succeeds if it is already gone. */
  removeContainer(req: m.RemoveContainerRequest, opts?: CallOptions): Promise<m.EmptyResponse>;
  /** Containers matching every field set in the filter. */
  listContainers(
    req: m.ListContainersRequest,
    opts?: CallOptions,
  ): Promise<m.ListContainersResponse>;
  /** Status of one container (exit code, reason, timestamps); NotFound if it does not exist. */
  containerStatus(
    req: m.ContainerStatusRequest,
    opts?: CallOptions,
  ): Promise<m.ContainerStatusResponse>;
  /** Changes the cgroup limits of a created or running container. */
  updateContainerResources(
    req: m.UpdateContainerResourcesRequest,
    opts?: CallOptions,
  ): Promise<m.EmptyResponse>;
  /** Makes the runtime reopen the container's log file (after the file was rotated). */
  reopenContainerLog(
    req: m.ReopenContainerLogRequest,
    opts?: CallOptions,
  ): Promise<m.EmptyResponse>;
  /** Runs a command in a running container and returns its output and exit code. */
  execSync(req: m.ExecSyncRequest, opts?: CallOptions): Promise<m.ExecSyncResponse>;
  /** Prepares an interactive command in a running container: the URL of the runtime's
   * streaming server where the caller runs it. */
  exec(req: m.ExecRequest, opts?: CallOptions): Promise<m.StreamUrlResponse>;
  /** Prepares attaching to a running container's main process (a streaming server URL). */
  attach(req: m.AttachRequest, opts?: CallOptions): Promise<m.StreamUrlResponse>;
  /** Prepares forwarding to ports in a sandbox's network namespace (a streaming server URL). */
  portForward(req: m.PortForwardRequest, opts?: CallOptions): Promise<m.StreamUrlResponse>;

  /** CPU, memory and writable-layer usage of one container. */
  containerStats(
    req: m.ContainerStatsRequest,
    opts?: CallOptions,
  ): Promise<m.ContainerStatsResponse>;
  /** Stats of the containers matching the filter. */
  listContainerStats(
    req: m.ListContainerStatsRequest,
    opts?: CallOptions,
  ): Promise<m.ListContainerStatsResponse>;
  /** Stats of one sandbox and its containers (containerd 1.6 may answer Unimplemented). */
  podSandboxStats(
    req: m.PodSandboxStatsRequest,
    opts?: CallOptions,
  ): Promise<m.PodSandboxStatsResponse>;
  /** Stats of the sandboxes matching the filter. */
  listPodSandboxStats(
    req: m.ListPodSandboxStatsRequest,
    opts?: CallOptions,
  ): Promise<m.ListPodSandboxStatsResponse>;
}

interface ImageService {
  /** Images present on the node, optionally filtered by name. */
  listImages(req: m.ListImagesRequest, opts?: CallOptions): Promise<m.ListImagesResponse>;
  /** One image; `image` is null (not an error) when it is not present. */
  imageStatus(req: m.ImageStatusRequest, opts?: CallOptions): Promise<m.ImageStatusResponse>;
  /** Pulls an image, using `auth` if given; resolves to the image's ref. Slow: long deadline. */
  pullImage(req: m.PullImageRequest, opts?: CallOptions): Promise<m.PullImageResponse>;
  /** Removes an image. Succeeds if it is already gone; fails if a container uses it. */
  removeImage(req: m.RemoveImageRequest, opts?: CallOptions): Promise<m.EmptyResponse>;
  /** Usage of the filesystem(s) holding images and container layers. */
  imageFsInfo(req: m.ImageFsInfoRequest, opts?: CallOptions): Promise<m.ImageFsInfoResponse>;
}

export type CriRuntime = RuntimeService & ImageService;
export type CriMethod = keyof CriRuntime;

/** The gRPC service and RPC name behind each method. */
export const CRI_RPCS: {
  readonly [K in CriMethod]: readonly ["RuntimeService" | "ImageService", string];
} = {
  version: ["RuntimeService", "Version"],
  status: ["RuntimeService", "Status"],
  runtimeConfig: ["RuntimeService", "RuntimeConfig"],
  runPodSandbox: ["RuntimeService", "RunPodSandbox"],
  stopPodSandbox: ["RuntimeService", "StopPodSandbox"],
  removePodSandbox: ["RuntimeService", "RemovePodSandbox"],
  podSandboxStatus: ["RuntimeService", "PodSandboxStatus"],
  listPodSandbox: ["RuntimeService", "ListPodSandbox"],
  createContainer: ["RuntimeService", "CreateContainer"],
  startContainer: ["RuntimeService", "StartContainer"],
  stopContainer: ["RuntimeService", "StopContainer"],
  removeContainer: ["RuntimeService", "RemoveContainer"],
  listContainers: ["RuntimeService", "ListContainers"],
  containerStatus: ["RuntimeService", "ContainerStatus"],
  updateContainerResources: ["RuntimeService", "UpdateContainerResources"],
  reopenContainerLog: ["RuntimeService", "ReopenContainerLog"],
  execSync: ["RuntimeService", "ExecSync"],
  exec: ["RuntimeService", "Exec"],
  attach: ["RuntimeService", "Attach"],
  portForward: ["RuntimeService", "PortForward"],
  containerStats: ["RuntimeService", "ContainerStats"],
  listContainerStats: ["RuntimeService", "ListContainerStats"],
  podSandboxStats: ["RuntimeService", "PodSandboxStats"],
  listPodSandboxStats: ["RuntimeService", "ListPodSandboxStats"],
  listImages: ["ImageService", "ListImages"],
  imageStatus: ["ImageService", "ImageStatus"],
  pullImage: ["ImageService", "PullImage"],
  removeImage: ["ImageService", "RemoveImage"],
  imageFsInfo: ["ImageService", "ImageFsInfo"],
};
