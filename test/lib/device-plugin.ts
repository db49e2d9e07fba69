// A small device plugin for the tests, on the project's own gRPC stack: it serves the DevicePlugin
// service on its socket in the device plugin folder and registers at kubelet.sock there, as a
// real plugin does. What it answers is set by its options; every call it gets is recorded.
// The plugin side of the messages is encoded and decoded here with the proto's own field names,
// not with the agent's typed functions (api.ts), so the two sides are written apart.
import { join } from "node:path";
import {
  DEVICE_PLUGIN_API_VERSION,
  DEVICE_PLUGIN_PATHS,
  devicePluginSchema,
  HEALTHY,
  KUBELET_SOCKET,
  REGISTER_PATH,
  UNHEALTHY,
} from "../../src/agent/cm/devicemanager/api.ts";
import type { ContainerAllocation } from "../../src/agent/cm/devicemanager/types.ts";
import { decodeMessage, encodeMessage } from "../../src/cri/codec.ts";
import { GrpcStatus } from "../../src/cri/errors.ts";
import { GrpcError, type GrpcServer, startGrpcServer } from "../../src/cri/grpc-server.ts";
import { TransportError } from "../../src/cri/grpc-wire.ts";
import { createH2Transport } from "../../src/cri/transport.ts";

export interface TestDevice {
  id: string;
  healthy: boolean;
  numaNodes?: number[];
}

type DeviceSpec = ContainerAllocation["devices"][number];

export interface TestDevicePluginOptions {
  /** The device plugin folder (kubelet.sock is there). */
  dir: string;
  /** The plugin's socket file name in `dir`. */
  socketName: string;
  resourceName: string;
  devices: TestDevice[];
  preStartRequired?: boolean;
  /** Offers GetPreferredAllocation. */
  preferredAvailable?: boolean;
  /** Its answer to GetPreferredAllocation; default: every one of mustInclude, then the first
   * others of available, up to size. */
  preferred?: (available: string[], mustInclude: string[], size: number) => string[];
  /** Allocate's environment for the ids. */
  envsFor?: (ids: string[]) => Record<string, string>;
  /** Allocate's device nodes for the ids. */
  deviceNodes?: (ids: string[]) => DeviceSpec[];
  /** The rest of Allocate's answer (mounts, annotations, CDI names; overrides the above). */
  allocationFor?: (ids: string[]) => Partial<ContainerAllocation>;
  /** Allocate never answers (until the caller's deadline). */
  hangAllocate?: boolean;
  /** The version it registers with. Default "v1beta1". */
  apiVersion?: string;
  /** Called with each Allocate and PreStartContainer request's ids, as it arrives. */
  onCall?: (method: "Allocate" | "PreStartContainer", ids: string[]) => void;
}

const schema = devicePluginSchema;
const encode = (type: string, obj: unknown) => encodeMessage(schema(type), obj);
const decode = <T>(type: string, buf: Buffer) => decodeMessage(schema(type), buf) as T;

/** The default preference: mustInclude, then available in order. */
function firstOf(available: string[], mustInclude: string[], size: number): string[] {
  const out = [...mustInclude];
  for (const id of available) {
    if (out.length >= size) break;
    if (!out.includes(id)) out.push(id);
  }
  return out.slice(0, size);
}

export class TestDevicePlugin {
  /** Every Allocate's device ids (one entry a container request), in order. */
  readonly allocations: string[][] = [];
  /** Every PreStartContainer's device ids. */
  readonly preStarts: string[][] = [];
  /** Every GetPreferredAllocation's question. */
  readonly preferred: { available: string[]; mustInclude: string[]; size: number }[] = [];
  /** The device list it serves now. */
  private devices: TestDevice[];
  /** Open ListAndWatch streams: each sends a list. */
  private readonly streams = new Set<(list: Buffer) => void>();
  private server: GrpcServer | undefined;

  constructor(readonly options: TestDevicePluginOptions) {
    this.devices = options.devices.map((d) => ({ ...d }));
  }

  get socketPath(): string {
    return join(this.options.dir, this.options.socketName);
  }

  /** ListAndWatch streams open now. */
  get openStreams(): number {
    return this.streams.size;
  }

  /** Serves the DevicePlugin service on its socket. */
  async start(): Promise<void> {
    this.server = await startGrpcServer({
      socketPath: this.socketPath,
      unary: {
        [DEVICE_PLUGIN_PATHS.getDevicePluginOptions]: () => this.pluginOptions(),
        [DEVICE_PLUGIN_PATHS.getPreferredAllocation]: (req) => this.preferredAllocation(req),
        [DEVICE_PLUGIN_PATHS.allocate]: (req, ctx) => this.allocate(req, ctx.signal),
        [DEVICE_PLUGIN_PATHS.preStartContainer]: (req) => this.preStart(req),
      },
      serverStreams: {
        [DEVICE_PLUGIN_PATHS.listAndWatch]: (_req, send, ctx) =>
          this.listAndWatch(send, ctx.signal),
      },
    });
  }

  /** Registers at kubelet.sock; rejects with the agent's error text when refused. */
  async register(): Promise<void> {
    const transport = createH2Transport({
      address: { unix: join(this.options.dir, KUBELET_SOCKET) },
      maxReceiveBytes: 1 << 20,
      windowBytes: 1 << 20,
      maxHeaderListBytes: 1 << 20,
    });
    const request = encode("RegisterRequest", {
      version: this.options.apiVersion ?? DEVICE_PLUGIN_API_VERSION,
      endpoint: this.options.socketName,
      resourceName: this.options.resourceName,
      options: this.rawOptions(),
    });
    try {
      await transport.call(REGISTER_PATH, request, 15_000);
    } catch (err) {
      throw new Error(err instanceof TransportError ? err.details : String(err), { cause: err });
    } finally {
      transport.close();
    }
  }

  /** Marks one device healthy or not, and sends the new list. */
  setHealth(id: string, healthy: boolean): void {
    const device = this.devices.find((d) => d.id === id);
    if (device === undefined) throw new Error(`the test plugin has no device ${id}`);
    device.healthy = healthy;
    this.push();
  }

  /** Replaces the device list, and sends it. */
  setDevices(devices: TestDevice[]): void {
    this.devices = devices.map((d) => ({ ...d }));
    this.push();
  }

  /** Stops serving: its streams end, its socket goes. */
  stop(): void {
    this.server?.close();
    this.server = undefined;
    this.streams.clear();
  }

  private rawOptions() {
    return {
      preStartRequired: this.options.preStartRequired ?? false,
      getPreferredAllocationAvailable: this.options.preferredAvailable ?? false,
    };
  }

  private pluginOptions(): Buffer {
    return encode("DevicePluginOptions", this.rawOptions());
  }

  private deviceList(): Buffer {
    return encode("ListAndWatchResponse", {
      devices: this.devices.map((d) => ({
        ID: d.id,
        health: d.healthy ? HEALTHY : UNHEALTHY,
        topology: d.numaNodes ? { nodes: d.numaNodes.map((n) => ({ ID: n })) } : undefined,
      })),
    });
  }

  private push(): void {
    const list = this.deviceList();
    for (const send of this.streams) send(list);
  }

  private listAndWatch(send: (m: Uint8Array) => void, signal: AbortSignal): Promise<void> {
    send(this.deviceList());
    this.streams.add(send);
    return new Promise((resolve) => {
      signal.addEventListener(
        "abort",
        () => {
          this.streams.delete(send);
          resolve();
        },
        { once: true },
      );
    });
  }

  private preferredAllocation(request: Buffer): Buffer {
    type Req = {
      availableDeviceIDs: string[];
      mustIncludeDeviceIDs: string[];
      allocationSize: number;
    };
    const { containerRequests } = decode<{ containerRequests: Req[] }>(
      "PreferredAllocationRequest",
      request,
    );
    const choose = this.options.preferred ?? firstOf;
    const containerResponses = containerRequests.map((c) => {
      const question = {
        available: c.availableDeviceIDs,
        mustInclude: c.mustIncludeDeviceIDs,
        size: c.allocationSize,
      };
      this.preferred.push(question);
      return { deviceIDs: choose(question.available, question.mustInclude, question.size) };
    });
    return encode("PreferredAllocationResponse", { containerResponses });
  }

  private async allocate(request: Buffer, signal: AbortSignal): Promise<Buffer> {
    const { containerRequests } = decode<{ containerRequests: { devicesIds: string[] }[] }>(
      "AllocateRequest",
      request,
    );
    for (const c of containerRequests) {
      this.allocations.push(c.devicesIds);
      this.options.onCall?.("Allocate", c.devicesIds);
    }
    if (this.options.hangAllocate) {
      await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
      throw new GrpcError(GrpcStatus.CANCELLED, "the test plugin hung in Allocate");
    }
    const containerResponses = containerRequests.map(({ devicesIds: ids }) => {
      const a: Partial<ContainerAllocation> = {
        envs: this.options.envsFor?.(ids) ?? {},
        devices: this.options.deviceNodes?.(ids) ?? [],
        ...this.options.allocationFor?.(ids),
      };
      return { ...a, cdiDevices: (a.cdiDevices ?? []).map((name) => ({ name })) };
    });
    return encode("AllocateResponse", { containerResponses });
  }

  private preStart(request: Buffer): Buffer {
    const { devicesIds } = decode<{ devicesIds: string[] }>("PreStartContainerRequest", request);
    this.preStarts.push(devicesIds);
    this.options.onCall?.("PreStartContainer", devicesIds);
    return encode("PreStartContainerResponse", {});
  }
}
