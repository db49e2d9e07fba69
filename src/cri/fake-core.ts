// State, test controls and shared internals of the fake runtime (fake.ts has the RPCs).

import { CriError, GrpcStatus } from "./errors.ts";
import type { ContainerEventHandler, ContainerEventKind } from "./events.ts";
import { FakeImages } from "./fake-images.ts";
import { exitReason, failed, notFound, resolveId } from "./fake-support.ts";
import type { FakeContainer, FakeSandbox } from "./fake-views.ts";
import { type CallOptions, CRI_RPCS, type CriMethod } from "./service.ts";
import type * as t from "./types.ts";

export interface ExecResult {
  exitCode: number;
  stdout?: string;
  stderr?: string;
}

export interface FakeRuntimeOptions {
  /** Current time in ms. Default Date.now. */
  now?: () => number;
  /** Exit code of a running container stopped by StopContainer or StopPodSandbox. Default 137. */
  stopExitCode?: number;
}

export type FakeHook = (method: CriMethod, request: unknown) => void | Promise<void>;

export abstract class FakeRuntimeBase {
  /** Every call made, oldest first. Tests may clear it. */
  readonly calls: { method: CriMethod; request: unknown }[] = [];
  readonly sandboxes = new Map<string, FakeSandbox>();
  readonly containers = new Map<string, FakeContainer>();
  /** Images present on the "node" and images the "registry" can serve. */
  readonly images: FakeImages;
  /** Answers ExecSync; default: exit code 0, no output. */
  execHandler: (container: FakeContainer, cmd: string[]) => ExecResult = () => ({ exitCode: 0 });
  /** The `info` of a verbose Status (containerd puts its config JSON under "config"). */
  statusInfo: Record<string, string> = {};
  /** The cgroup driver RuntimeConfig answers; undefined: Unimplemented, as containerd 1.6. */
  cgroupDriver: "SYSTEMD" | "CGROUPFS" | undefined;
  /** Conditions reported by Status. */
  conditions: t.RuntimeCondition[] = [
    { type: "RuntimeReady", status: true, reason: "", message: "" },
    { type: "NetworkReady", status: true, reason: "", message: "" },
  ];

  protected readonly now: () => number;
  protected readonly stopExitCode: number;
  private readonly failures = new Map<CriMethod, Error[]>();
  private hook: FakeHook | undefined;
  private unavailable = false;
  protected seq = 0;
  /** Reserved names ("name_namespace_uid_attempt"), like containerd's name index. */
  private readonly names = new Map<string, string>();
  /** Open container event streams, and how to end each. */
  private readonly eventStreams = new Map<ContainerEventHandler, (e: CriError) => void>();
  /** The runtime answers UNIMPLEMENTED to event streams (an older runtime). */
  eventsUnimplemented = false;

  constructor(options: FakeRuntimeOptions = {}) {
    this.now = options.now ?? Date.now;
    this.stopExitCode = options.stopExitCode ?? 137;
    this.images = new FakeImages(() => this.nowNs());
  }

  // ---- driving the fake from tests ----

  /** The next call of `method` rejects with `error` (queued: call it twice for two failures). */
  failNext(method: CriMethod, error: Error): void {
    const queue = this.failures.get(method) ?? [];
    queue.push(error);
    this.failures.set(method, queue);
  }

  /** Runs before every call (after it is recorded); throwing from it fails the call. */
  setHook(hook: FakeHook | undefined): void {
    this.hook = hook;
  }

  /** While down, every call rejects with an Unavailable CriError, like a stopped containerd,
   * and open event streams end. */
  setUnavailable(down: boolean): void {
    this.unavailable = down;
    if (down) this.endEventStreams();
  }

  /** Ends every open event stream with Unavailable (the runtime restarted). */
  endEventStreams(): void {
    const down = new CriError({
      rpc: "GetContainerEvents",
      grpcStatus: GrpcStatus.UNAVAILABLE,
      runtimeMessage: "the fake runtime is down",
    });
    for (const end of [...this.eventStreams.values()]) end(down);
  }

  /** Container events as the real client streams them: the fake's own changes, as they
   * happen (created, started, exited, oom, deleted). */
  containerEvents(handler: ContainerEventHandler, signal: AbortSignal): void {
    const fail = (grpcStatus: number, runtimeMessage: string) =>
      queueMicrotask(() =>
        handler.onEnd(new CriError({ rpc: "GetContainerEvents", grpcStatus, runtimeMessage })),
      );
    if (signal.aborted || this.unavailable || this.eventsUnimplemented) {
      if (signal.aborted) fail(GrpcStatus.CANCELLED, "cancelled");
      else if (this.unavailable) fail(GrpcStatus.UNAVAILABLE, "the fake runtime is down");
      else fail(GrpcStatus.UNIMPLEMENTED, "no events here");
      return;
    }
    const end = (error: CriError) => {
      if (!this.eventStreams.delete(handler)) return;
      signal.removeEventListener("abort", onAbort);
      handler.onEnd(error);
    };
    const onAbort = () =>
      end(
        new CriError({
          rpc: "GetContainerEvents",
          grpcStatus: GrpcStatus.CANCELLED,
          runtimeMessage: "cancelled",
        }),
      );
    this.eventStreams.set(handler, end);
    signal.addEventListener("abort", onAbort, { once: true });
    handler.onOpen?.("cri");
  }

  /** A running container exits by itself (crash, completion, OOM kill). */
  exitContainer(id: string, exitCode: number, reason?: string, message = ""): void {
    const c = this.mustGetContainer(id);
    if (c.state !== "CONTAINER_RUNNING") {
      throw new Error(`Fake: cannot exit container ${id} in state ${c.state}`);
    }
    this.markExited(c, exitCode, reason ?? exitReason(exitCode), message);
  }

  /** The sandbox dies (pause process gone, network lost): it becomes NOTREADY. */
  killSandbox(id: string): void {
    const sb = this.sandboxes.get(id);
    if (!sb) throw new Error(`Fake: no sandbox ${id}`);
    sb.state = "SANDBOX_NOTREADY";
    this.emit(id, "exited");
  }

  /** Calls of one method, oldest first. */
  callsOf(method: CriMethod): unknown[] {
    return this.calls.filter((c) => c.method === method).map((c) => c.request);
  }

  // ---- internals ----

  protected async enter(method: CriMethod, request: unknown, opts?: CallOptions): Promise<void> {
    this.calls.push({ method, request: structuredClone(request) });
    const rpc = CRI_RPCS[method][1];
    if (opts?.signal?.aborted) {
      throw new CriError({ rpc, grpcStatus: GrpcStatus.CANCELLED, runtimeMessage: "cancelled" });
    }
    if (this.unavailable) {
      throw new CriError({
        rpc,
        grpcStatus: GrpcStatus.UNAVAILABLE,
        runtimeMessage: "the fake runtime is down",
      });
    }
    const injected = this.failures.get(method)?.shift();
    if (injected) throw injected;
    await this.hook?.(method, request);
  }

  protected async unimplemented(method: CriMethod, request: unknown): Promise<never> {
    this.calls.push({ method, request: structuredClone(request) });
    throw new Error(`not implemented by the fake runtime: ${CRI_RPCS[method][1]}`);
  }

  protected nowNs(): number {
    return this.now() * 1e6;
  }

  protected reserve(rpc: string, name: string, id: string): void {
    const holder = this.names.get(name);
    if (holder !== undefined) {
      throw failed(
        rpc,
        `failed to reserve name ${JSON.stringify(name)}: it is reserved for ${JSON.stringify(holder)}`,
      );
    }
    this.names.set(name, id);
  }

  protected release(id: string): void {
    for (const [name, holder] of this.names) if (holder === id) this.names.delete(name);
  }

  protected mustGetContainer(id: string): FakeContainer {
    const c = resolveId(this.containers, id);
    if (!c) throw new Error(`Fake: no container ${id}`);
    return c;
  }

  protected getContainer(rpc: string, id: string): FakeContainer {
    const c = resolveId(this.containers, id);
    if (!c) throw notFound(rpc, "container", id);
    return c;
  }

  protected markExited(c: FakeContainer, exitCode: number, reason: string, message: string): void {
    c.state = "CONTAINER_EXITED";
    c.exitCode = exitCode;
    c.reason = reason;
    c.message = message;
    c.finishedAt = this.nowNs();
    if (reason === "OOMKilled") this.emit(c.id, "oom");
    this.emit(c.id, "exited");
  }

  protected deleteContainer(c: FakeContainer): void {
    this.containers.delete(c.id);
    this.release(c.id);
    this.emit(c.id, "deleted");
  }

  /** Tells every open event stream. */
  protected emit(containerId: string, kind: ContainerEventKind): void {
    for (const handler of this.eventStreams.keys()) handler.onEvent({ containerId, kind });
  }
}
