// The CRI client: a CriRuntime over gRPC calls to a local unix socket (transport.ts).
//
// Invariants:
// - Every call has a deadline (per-call `timeoutMs`, else the default for its kind of RPC) and
//   settles exactly once, with the response or a CriError.
// - Calls do not wait for the runtime: while it is down they fail at once with code
//   "Unavailable", and the next call connects again, so the same client works again as soon as
//   the runtime is back.
// - Only the per-method serializers and decoders are kept after construction.
// - ListPodSandbox and ListContainers results are read-only: their items are frozen and may be
//   shared between calls (list-decoding.ts).

import { decodeMessage, MessageEncoder } from "./codec.ts";
import { parseCriEndpoint } from "./endpoint.ts";
import { CriError, criErrorFromGrpc, GrpcStatus } from "./errors.ts";
import { type ContainerEvents, createContainerEvents } from "./events.ts";
import { type GrpcTransport, LOCAL_PEER_HEADER_BYTES } from "./grpc-wire.ts";
import { createListDecoder } from "./list-decoding.ts";
import { CRI_PACKAGE, loadCriProto } from "./proto.ts";
import type * as m from "./requests.ts";
import { type CallOptions, CRI_RPCS, type CriMethod, type CriRuntime } from "./service.ts";
import { createH2Transport } from "./transport.ts";

export interface CriClientOptions {
  /** "unix:///path/to/socket"; nothing else is accepted. */
  endpoint: string;
  /** Deadline of queries (version, status, list, status, stats, image status). Default 10 s. */
  defaultTimeoutMs?: number;
  /**
   * Deadline of sandbox and container lifecycle calls (run, create, start, stop, remove, update),
   * which may be slow on a busy device: RunPodSandbox may pull the pause image. Default 2 min,
   * the kubelet's runtime request timeout. StopContainer adds its grace period to it.
   */
  lifecycleTimeoutMs?: number;
  /** Deadline of PullImage. Default 10 min: edge links are slow. */
  pullImageTimeoutMs?: number;
  /** Largest response accepted. Default 16 MiB. */
  maxReceiveMessageBytes?: number;
  /** Called when each call settles: the method, how long it took (ms) and the error if any. */
  onCall?: (method: CriMethod, ms: number, error?: CriError) => void;
}

export interface CriClient extends CriRuntime, ContainerEvents {
  /** The endpoint this client talks to. */
  readonly endpoint: string;
  /** Closes the connection; calls in flight and later calls reject. Idempotent. */
  close(): void;
}

const CRI_DEFAULT_TIMEOUT_MS = 10_000;
const CRI_LIFECYCLE_TIMEOUT_MS = 120_000;
const CRI_PULL_IMAGE_TIMEOUT_MS = 600_000;

const LIFECYCLE: ReadonlySet<CriMethod> = new Set<CriMethod>([
  "runPodSandbox",
  "stopPodSandbox",
  "removePodSandbox",
  "createContainer",
  "startContainer",
  "stopContainer",
  "removeContainer",
  "updateContainerResources",
  "removeImage",
]);

interface Rpc {
  rpc: string;
  path: string;
  serialize: (value: unknown) => Buffer;
  deserialize: (buf: Buffer) => unknown;
}

/** The list responses decoded by reusing unchanged items (see list-decoding.ts): their response
 * field and item type. */
const REUSED_LISTS: Partial<Record<CriMethod, { field: string; type: string }>> = {
  listPodSandbox: { field: "items", type: "PodSandbox" },
  listContainers: { field: "containers", type: "Container" },
};

function loadRpcTable(
  proto: ReturnType<typeof loadCriProto>,
  encoder: MessageEncoder,
): Record<CriMethod, Rpc> {
  const table = {} as Record<CriMethod, Rpc>;
  for (const [method, [service, name]] of Object.entries(CRI_RPCS) as [
    CriMethod,
    readonly [string, string],
  ][]) {
    const { path, request, response } = proto.rpc(service, name);
    const decodeResponse = (buf: Buffer) => decodeMessage(response, buf);
    const list = REUSED_LISTS[method];
    table[method] = {
      rpc: name,
      path,
      serialize: (value) => encoder.encode(request, value),
      deserialize: list
        ? createListDecoder({
            field: list.field,
            decodeResponse,
            decodeItem: proto.decoder(`${CRI_PACKAGE}.${list.type}`),
            mapFields: proto.mapFields(`${CRI_PACKAGE}.${list.type}`),
          })
        : decodeResponse,
    };
  }
  return table;
}

/** The deadline a call gets when the caller does not give one. */
export function defaultTimeoutFor(
  method: CriMethod,
  req: unknown,
  t: { defaultMs: number; lifecycleMs: number; pullMs: number },
): number {
  const seconds = (req as { timeout?: number } | null)?.timeout ?? 0;
  if (method === "pullImage") return t.pullMs;
  if (method === "stopContainer") return Math.max(0, seconds) * 1000 + t.lifecycleMs;
  if (method === "execSync") return seconds > 0 ? seconds * 1000 + t.defaultMs : t.lifecycleMs;
  return LIFECYCLE.has(method) ? t.lifecycleMs : t.defaultMs;
}

export function createCriClient(options: CriClientOptions): CriClient {
  const caller = new CriCaller(options);
  const call = <Res>(method: CriMethod, req: unknown, opts?: CallOptions) =>
    caller.call<Res>(method, req, opts);
  return {
    endpoint: caller.endpoint,
    containerEvents: (handler, signal) => caller.events.containerEvents(handler, signal),
    close: () => caller.close(),
    version: (r: m.VersionRequest, o?: CallOptions) => call("version", r, o),
    status: (r: m.StatusRequest, o?: CallOptions) => call("status", r, o),
    runPodSandbox: (r, o) => call("runPodSandbox", r, o),
    stopPodSandbox: (r, o) => call("stopPodSandbox", r, o),
    removePodSandbox: (r, o) => call("removePodSandbox", r, o),
    podSandboxStatus: (r, o) => call("podSandboxStatus", r, o),
    listPodSandbox: (r, o) => call("listPodSandbox", r, o),
    createContainer: (r, o) => call("createContainer", r, o),
    startContainer: (r, o) => call("startContainer", r, o),
    stopContainer: (r, o) => call("stopContainer", r, o),
    removeContainer: (r, o) => call("removeContainer", r, o),
    listContainers: (r, o) => call("listContainers", r, o),
    containerStatus: (r, o) => call("containerStatus", r, o),
    updateContainerResources: (r, o) => call("updateContainerResources", r, o),
    reopenContainerLog: (r, o) => call("reopenContainerLog", r, o),
    execSync: (r, o) => call("execSync", r, o),
    exec: (r, o) => call("exec", r, o),
    attach: (r, o) => call("attach", r, o),
    portForward: (r, o) => call("portForward", r, o),
    containerStats: (r, o) => call("containerStats", r, o),
    listContainerStats: (r, o) => call("listContainerStats", r, o),
    podSandboxStats: (r, o) => call("podSandboxStats", r, o),
    listPodSandboxStats: (r, o) => call("listPodSandboxStats", r, o),
    listImages: (r, o) => call("listImages", r, o),
    imageStatus: (r, o) => call("imageStatus", r, o),
    pullImage: (r, o) => call("pullImage", r, o),
    removeImage: (r, o) => call("removeImage", r, o),
    imageFsInfo: (r, o) => call("imageFsInfo", r, o),
    runtimeConfig: (r, o) => call("runtimeConfig", r, o),
  };
}

/** One runtime's calls: the transport, the RPC table, deadlines and error mapping. */
class CriCaller {
  readonly endpoint: string;
  readonly events: ContainerEvents;
  private readonly timeouts: { defaultMs: number; lifecycleMs: number; pullMs: number };
  private readonly rpcs: Record<CriMethod, Rpc>;
  private readonly transport: GrpcTransport;
  /** close() was called: every later call fails CANCELLED. */
  private closed = false;

  constructor(private readonly options: CriClientOptions) {
    const { endpoint, socketPath } = parseCriEndpoint(options.endpoint);
    this.endpoint = endpoint;
    this.timeouts = {
      defaultMs: options.defaultTimeoutMs ?? CRI_DEFAULT_TIMEOUT_MS,
      lifecycleMs: options.lifecycleTimeoutMs ?? CRI_LIFECYCLE_TIMEOUT_MS,
      pullMs: options.pullImageTimeoutMs ?? CRI_PULL_IMAGE_TIMEOUT_MS,
    };
    const proto = loadCriProto();
    this.rpcs = loadRpcTable(proto, new MessageEncoder());
    this.transport = createH2Transport({
      address: { unix: socketPath },
      maxReceiveBytes: options.maxReceiveMessageBytes ?? 16 * 1024 * 1024,
      // A 1 MiB HTTP/2 window lets containerd send a whole pod listing (over 100 KB at 110 pods,
      // far more than HTTP/2's default 64 KiB) without waiting for window updates.
      windowBytes: 1 << 20,
      maxHeaderListBytes: LOCAL_PEER_HEADER_BYTES,
    });
    this.events = createContainerEvents(this.transport, proto);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.transport.close();
  }

  async call<Res>(method: CriMethod, req: unknown, opts?: CallOptions): Promise<Res> {
    const { rpc, path, serialize, deserialize } = this.rpcs[method];
    const timeoutMs = opts?.timeoutMs ?? defaultTimeoutFor(method, req, this.timeouts);
    const signal = opts?.signal;
    if (this.closed) {
      const runtimeMessage = `the CRI client for ${this.endpoint} is closed`;
      throw new CriError({ rpc, grpcStatus: GrpcStatus.CANCELLED, runtimeMessage });
    }
    if (signal?.aborted) {
      const runtimeMessage = "cancelled by the caller before it was sent";
      throw new CriError({ rpc, grpcStatus: GrpcStatus.CANCELLED, runtimeMessage });
    }
    const onCall = this.options.onCall;
    const started = onCall ? performance.now() : 0;
    let res: Res;
    try {
      const answer = await this.transport.call(path, serialize(req ?? {}), timeoutMs, signal);
      res = deserialize(answer) as Res;
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      const context =
        typeof code === "number" ? contextFor(code, this.endpoint, timeoutMs) : undefined;
      const error = criErrorFromGrpc(rpc, err, context);
      onCall?.(method, performance.now() - started, error);
      throw error;
    }
    onCall?.(method, performance.now() - started);
    return res;
  }
}

function contextFor(code: number, endpoint: string, timeoutMs: number): string | undefined {
  switch (code) {
    case GrpcStatus.UNAVAILABLE:
      return `runtime at ${endpoint} unavailable`;
    case GrpcStatus.DEADLINE_EXCEEDED:
      return `no answer from ${endpoint} within ${timeoutMs} ms`;
    case GrpcStatus.CANCELLED:
      return "cancelled by the caller";
    default:
      return undefined;
  }
}
