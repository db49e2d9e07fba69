// An in-memory CRI runtime for unit tests, behind the same CriRuntime interface as the client.
// It keeps sandboxes, containers and images, and behaves like containerd 1.6 where the kubelet
// logic depends on it: name reservation per attempt, id prefixes, idempotent stop/remove,
// NotFound for missing objects, filters, image name normalization, exit reasons.
//
// Invariants:
// - Every call is recorded in `calls` (a copy of the request) before anything else happens.
// - Returned objects are copies: changing them never changes the fake's state.
// - Timestamps come from the injected clock (ms) and are reported in ns, like the runtime.
// - A container belongs to exactly one existing sandbox; removing the sandbox removes it.

import { CriError, GrpcStatus } from "./errors.ts";
import type { ContainerEvents } from "./events.ts";
import { FakeRuntimeBase, type FakeRuntimeOptions } from "./fake-core.ts";
import {
  bytes,
  exitReason,
  failed,
  fakeId,
  matchesLabels,
  notFound,
  resolveId,
} from "./fake-support.ts";
import { toContainer, toContainerStatus, toPodSandbox, toPodSandboxStatus } from "./fake-views.ts";
import type * as m from "./requests.ts";
import type { CallOptions, CriRuntime } from "./service.ts";

export type { FakeRuntimeOptions } from "./fake-core.ts";

export function createFakeRuntime(options: FakeRuntimeOptions = {}): FakeRuntime {
  return new FakeRuntime(options);
}

export class FakeRuntime extends FakeRuntimeBase implements CriRuntime, ContainerEvents {
  // ---- runtime ----

  async version(req: m.VersionRequest, o?: CallOptions): Promise<m.VersionResponse> {
    await this.enter("version", req, o);
    return {
      version: "0.1.0",
      runtimeName: "fake",
      runtimeVersion: "0.0.0",
      runtimeApiVersion: "v1",
    };
  }

  async status(req: m.StatusRequest, o?: CallOptions): Promise<m.StatusResponse> {
    await this.enter("status", req, o);
    return {
      status: { conditions: structuredClone(this.conditions) },
      info: req.verbose ? { ...this.statusInfo } : {},
      runtimeHandlers: [],
      features: null,
    };
  }

  async runtimeConfig(
    req: m.RuntimeConfigRequest,
    o?: CallOptions,
  ): Promise<m.RuntimeConfigResponse> {
    await this.enter("runtimeConfig", req, o);
    if (this.cgroupDriver === undefined)
      throw new CriError({
        rpc: "RuntimeConfig",
        grpcStatus: GrpcStatus.UNIMPLEMENTED,
        runtimeMessage: "unknown method RuntimeConfig",
      });
    return { linux: { cgroupDriver: this.cgroupDriver } };
  }

  // ---- sandboxes ----

  async runPodSandbox(
    req: m.RunPodSandboxRequest,
    o?: CallOptions,
  ): Promise<m.RunPodSandboxResponse> {
    await this.enter("runPodSandbox", req, o);
    const md = req.config?.metadata;
    if (!md?.name) throw failed("RunPodSandbox", "sandbox config must include metadata.name");
    const id = fakeId("5b", ++this.seq);
    this.reserve("RunPodSandbox", `${md.name}_${md.namespace}_${md.uid}_${md.attempt ?? 0}`, id);
    const hostNet = req.config.linux?.securityContext?.namespaceOptions?.network === "NODE";
    this.sandboxes.set(id, {
      id,
      config: structuredClone(req.config),
      state: "SANDBOX_READY",
      createdAt: this.nowNs(),
      ip: hostNet ? "" : `10.88.${(this.seq >> 8) & 255}.${this.seq & 255}`,
      runtimeHandler: req.runtimeHandler ?? "",
    });
    return { podSandboxId: id };
  }

  async stopPodSandbox(req: m.StopPodSandboxRequest, o?: CallOptions): Promise<m.EmptyResponse> {
    await this.enter("stopPodSandbox", req, o);
    const sb = resolveId(this.sandboxes, req.podSandboxId);
    if (!sb) throw notFound("StopPodSandbox", "sandbox", req.podSandboxId);
    for (const c of this.containers.values()) {
      if (c.podSandboxId === sb.id && c.state === "CONTAINER_RUNNING") {
        this.markExited(c, this.stopExitCode, exitReason(this.stopExitCode), "");
      }
    }
    sb.state = "SANDBOX_NOTREADY";
    return {};
  }

  async removePodSandbox(
    req: m.RemovePodSandboxRequest,
    o?: CallOptions,
  ): Promise<m.EmptyResponse> {
    await this.enter("removePodSandbox", req, o);
    const sb = resolveId(this.sandboxes, req.podSandboxId);
    if (!sb) return {};
    for (const c of [...this.containers.values()]) {
      if (c.podSandboxId === sb.id) this.deleteContainer(c);
    }
    this.sandboxes.delete(sb.id);
    this.release(sb.id);
    return {};
  }

  async podSandboxStatus(
    req: m.PodSandboxStatusRequest,
    o?: CallOptions,
  ): Promise<m.PodSandboxStatusResponse> {
    await this.enter("podSandboxStatus", req, o);
    const sb = resolveId(this.sandboxes, req.podSandboxId);
    if (!sb) throw notFound("PodSandboxStatus", "sandbox", req.podSandboxId);
    return {
      status: toPodSandboxStatus(sb),
      info: {},
      containersStatuses: [],
      timestamp: this.nowNs(),
    };
  }

  async listPodSandbox(
    req: m.ListPodSandboxRequest,
    o?: CallOptions,
  ): Promise<m.ListPodSandboxResponse> {
    await this.enter("listPodSandbox", req, o);
    const f = req.filter;
    const id = f?.id ? (resolveId(this.sandboxes, f.id)?.id ?? f.id) : "";
    const items = [...this.sandboxes.values()]
      .filter((sb) => !id || sb.id === id)
      .filter((sb) => !f?.state || sb.state === f.state.state)
      .filter((sb) => matchesLabels(sb.config.labels ?? {}, f?.labelSelector))
      .map((sb) => toPodSandbox(sb));
    return { items };
  }

  // ---- containers ----

  async createContainer(
    req: m.CreateContainerRequest,
    o?: CallOptions,
  ): Promise<m.CreateContainerResponse> {
    await this.enter("createContainer", req, o);
    const rpc = "CreateContainer";
    const sb = resolveId(this.sandboxes, req.podSandboxId);
    if (!sb) throw notFound(rpc, "sandbox", req.podSandboxId);
    if (sb.state !== "SANDBOX_READY")
      throw failed(rpc, `sandbox ${JSON.stringify(sb.id)} is not ready`);
    const md = req.config?.metadata;
    if (!md?.name) throw failed(rpc, "container config must include metadata.name");
    const imageName = req.config.image?.image ?? "";
    const image = this.images.find(imageName);
    if (!image) throw notFound(rpc, "image", imageName);
    const sm = sb.config.metadata;
    const id = fakeId("c0", ++this.seq);
    const name = `${md.name}_${sm.name}_${sm.namespace}_${sm.uid}_${md.attempt ?? 0}`;
    this.reserve(rpc, name, id);
    this.containers.set(id, {
      id,
      podSandboxId: sb.id,
      config: structuredClone(req.config),
      state: "CONTAINER_CREATED",
      createdAt: this.nowNs(),
      startedAt: 0,
      finishedAt: 0,
      exitCode: 0,
      reason: "",
      message: "",
      imageRef: image.repoDigests[0] ?? image.id,
      resources: structuredClone(req.config.linux?.resources ?? null),
    });
    return { containerId: id };
  }

  async startContainer(req: m.StartContainerRequest, o?: CallOptions): Promise<m.EmptyResponse> {
    await this.enter("startContainer", req, o);
    const c = this.getContainer("StartContainer", req.containerId);
    if (c.state !== "CONTAINER_CREATED") {
      throw failed("StartContainer", `container is in ${c.state} state`);
    }
    c.state = "CONTAINER_RUNNING";
    c.startedAt = this.nowNs();
    this.emit(c.id, "started");
    return {};
  }

  async stopContainer(req: m.StopContainerRequest, o?: CallOptions): Promise<m.EmptyResponse> {
    await this.enter("stopContainer", req, o);
    const c = this.getContainer("StopContainer", req.containerId);
    if (c.state === "CONTAINER_RUNNING") {
      this.markExited(c, this.stopExitCode, exitReason(this.stopExitCode), "");
    }
    return {};
  }

  async removeContainer(req: m.RemoveContainerRequest, o?: CallOptions): Promise<m.EmptyResponse> {
    await this.enter("removeContainer", req, o);
    const c = resolveId(this.containers, req.containerId);
    if (c) this.deleteContainer(c);
    return {};
  }

  async listContainers(
    req: m.ListContainersRequest,
    o?: CallOptions,
  ): Promise<m.ListContainersResponse> {
    await this.enter("listContainers", req, o);
    const f = req.filter;
    const id = f?.id ? (resolveId(this.containers, f.id)?.id ?? f.id) : "";
    const sbId = f?.podSandboxId
      ? (resolveId(this.sandboxes, f.podSandboxId)?.id ?? f.podSandboxId)
      : "";
    const containers = [...this.containers.values()]
      .filter((c) => !id || c.id === id)
      .filter((c) => !sbId || c.podSandboxId === sbId)
      .filter((c) => !f?.state || c.state === f.state.state)
      .filter((c) => matchesLabels(c.config.labels ?? {}, f?.labelSelector))
      .map((c) => toContainer(c));
    return { containers };
  }

  async containerStatus(
    req: m.ContainerStatusRequest,
    o?: CallOptions,
  ): Promise<m.ContainerStatusResponse> {
    await this.enter("containerStatus", req, o);
    const c = this.getContainer("ContainerStatus", req.containerId);
    const logDirectory = this.sandboxes.get(c.podSandboxId)?.config.logDirectory ?? "";
    return { status: toContainerStatus(c, logDirectory), info: {} };
  }

  async updateContainerResources(
    req: m.UpdateContainerResourcesRequest,
    o?: CallOptions,
  ): Promise<m.EmptyResponse> {
    await this.enter("updateContainerResources", req, o);
    const c = this.getContainer("UpdateContainerResources", req.containerId);
    if (c.state !== "CONTAINER_RUNNING" && c.state !== "CONTAINER_CREATED") {
      throw failed("UpdateContainerResources", `container is in ${c.state} state`);
    }
    c.resources = structuredClone(req.linux ?? null);
    return {};
  }

  async reopenContainerLog(
    req: m.ReopenContainerLogRequest,
    o?: CallOptions,
  ): Promise<m.EmptyResponse> {
    await this.enter("reopenContainerLog", req, o);
    const c = this.getContainer("ReopenContainerLog", req.containerId);
    if (c.state !== "CONTAINER_RUNNING")
      throw failed("ReopenContainerLog", "container is not running");
    return {};
  }

  async execSync(req: m.ExecSyncRequest, o?: CallOptions): Promise<m.ExecSyncResponse> {
    await this.enter("execSync", req, o);
    const c = this.getContainer("ExecSync", req.containerId);
    if (c.state !== "CONTAINER_RUNNING")
      throw failed("ExecSync", `container is in ${c.state} state`);
    const r = this.execHandler(c, [...req.cmd]);
    return { exitCode: r.exitCode, stdout: bytes(r.stdout ?? ""), stderr: bytes(r.stderr ?? "") };
  }

  // ---- streaming (the runtime's streaming server): not implemented ----

  exec(req: m.ExecRequest): Promise<m.StreamUrlResponse> {
    return this.unimplemented("exec", req);
  }
  attach(req: m.AttachRequest): Promise<m.StreamUrlResponse> {
    return this.unimplemented("attach", req);
  }
  portForward(req: m.PortForwardRequest): Promise<m.StreamUrlResponse> {
    return this.unimplemented("portForward", req);
  }

  // ---- stats: not implemented ----

  containerStats(req: m.ContainerStatsRequest): Promise<m.ContainerStatsResponse> {
    return this.unimplemented("containerStats", req);
  }
  listContainerStats(req: m.ListContainerStatsRequest): Promise<m.ListContainerStatsResponse> {
    return this.unimplemented("listContainerStats", req);
  }
  podSandboxStats(req: m.PodSandboxStatsRequest): Promise<m.PodSandboxStatsResponse> {
    return this.unimplemented("podSandboxStats", req);
  }
  listPodSandboxStats(req: m.ListPodSandboxStatsRequest): Promise<m.ListPodSandboxStatsResponse> {
    return this.unimplemented("listPodSandboxStats", req);
  }

  // ---- images ----

  async listImages(req: m.ListImagesRequest, o?: CallOptions): Promise<m.ListImagesResponse> {
    await this.enter("listImages", req, o);
    return { images: this.images.list(req.filter?.image?.image ?? "") };
  }

  async imageStatus(req: m.ImageStatusRequest, o?: CallOptions): Promise<m.ImageStatusResponse> {
    await this.enter("imageStatus", req, o);
    const image = this.images.find(req.image?.image ?? "");
    return { image: image ? structuredClone(image) : null, info: {} };
  }

  async pullImage(req: m.PullImageRequest, o?: CallOptions): Promise<m.PullImageResponse> {
    await this.enter("pullImage", req, o);
    return { imageRef: this.images.pull(req.image?.image ?? "", req.auth ?? undefined) };
  }

  async removeImage(req: m.RemoveImageRequest, o?: CallOptions): Promise<m.EmptyResponse> {
    await this.enter("removeImage", req, o);
    this.images.remove(req.image?.image ?? "");
    return {};
  }

  async imageFsInfo(req: m.ImageFsInfoRequest, o?: CallOptions): Promise<m.ImageFsInfoResponse> {
    await this.enter("imageFsInfo", req, o);
    return { imageFilesystems: [this.images.fsUsage()], containerFilesystems: [] };
  }
}
