// A registered device plugin reached over gRPC on its unix socket in the device plugin folder
// (the DevicePluginEndpoint of types.ts), through the binary's own gRPC client (transport.ts).
//
// Invariants:
// - connectDevicePlugin() resolves only once the plugin answered GetDevicePluginOptions (within
//   CONNECT_TIMEOUT_MS, trying again while its socket cannot be reached yet, as the kubelet's
//   blocking dial waits); else it rejects and leaves no connection open.
// - Every call has a deadline: callTimeoutMs for GetPreferredAllocation and Allocate (the kubelet
//   has none; a hung plugin must not hold a pod forever), the kubelet's 30 s for
//   PreStartContainer. ListAndWatch has none: it lasts as long as the plugin.
// - Every error thrown names the plugin and the call: `device plugin "r" (s.sock): Allocate
//   failed: ...`.
// - After close(), onEnd is never called and calls in flight reject.

import { join } from "node:path";
import { GrpcStatus } from "../../../cri/errors.ts";
import {
  type GrpcTransport,
  LOCAL_PEER_HEADER_BYTES,
  TransportError,
} from "../../../cri/grpc-wire.ts";
import { createH2Transport } from "../../../cri/transport.ts";
import { type Clock, realClock } from "../../../util/clock.ts";
import type { Logger } from "../../../util/log.ts";
import {
  CONNECT_TIMEOUT_MS,
  DEVICE_PLUGIN_PATHS,
  decodeAllocateResponse,
  decodeDeviceList,
  decodePluginOptions,
  decodePreferredAllocation,
  EMPTY_MESSAGE,
  encodeAllocateRequest,
  encodePreferredAllocationRequest,
  encodePreStartRequest,
  PRE_START_CONTAINER_TIMEOUT_MS,
} from "./api.ts";
import type {
  ContainerAllocation,
  DevicePluginEndpoint,
  PluginDevice,
  PluginOptions,
  Registration,
} from "./types.ts";

export interface EndpointOptions {
  /** The device plugin folder; the plugin's socket is join(dir, registration.endpoint). */
  dir: string;
  logger: Logger;
  /** Deadline of GetPreferredAllocation and Allocate (ms). */
  callTimeoutMs: number;
  /** Paces the retries while the plugin's socket cannot be reached. Default: the real clock. */
  clock?: Clock;
}

/** The largest message a plugin may send: a list of tens of thousands of devices fits. */
const MAX_RECEIVE_BYTES = 16 << 20;
/** Wait between tries to reach a plugin that registered before its socket listened. */
const CONNECT_RETRY_MS = 100;

/** Connects to the plugin of `registration` and checks that it answers. Its options are those of
 * its GetDevicePluginOptions answer, which the kubelet also keeps; an answer that differs from the
 * registration is logged. */
export async function connectDevicePlugin(
  registration: Registration,
  opts: EndpointOptions,
): Promise<DevicePluginEndpoint> {
  const transport = createH2Transport({
    address: { unix: join(opts.dir, registration.endpoint) },
    maxReceiveBytes: MAX_RECEIVE_BYTES,
    windowBytes: 1 << 20,
    maxHeaderListBytes: LOCAL_PEER_HEADER_BYTES,
  });
  const name = `device plugin ${JSON.stringify(registration.resourceName)} (${registration.endpoint})`;
  const logger = opts.logger.with({
    resourceName: registration.resourceName,
    endpoint: registration.endpoint,
  });
  try {
    const options = await fetchOptions(transport, name, opts.clock ?? realClock);
    const asked = registration.options;
    if (
      asked.preStartRequired !== options.preStartRequired ||
      asked.getPreferredAllocationAvailable !== options.getPreferredAllocationAvailable
    ) {
      logger.warn("The device plugin's options differ from its registration; using its answer", {
        registered: asked,
        answered: options,
      });
    }
    return new GrpcEndpoint(registration.resourceName, options, name, transport, logger, opts);
  } catch (err) {
    transport.close();
    throw err;
  }
}

/** GetDevicePluginOptions, tried again while the socket cannot be reached, until the deadline. */
async function fetchOptions(
  transport: GrpcTransport,
  name: string,
  clock: Clock,
): Promise<PluginOptions> {
  const deadline = clock.now() + CONNECT_TIMEOUT_MS;
  const path = DEVICE_PLUGIN_PATHS.getDevicePluginOptions;
  for (;;) {
    try {
      const left = Math.max(1, deadline - clock.now());
      return decodePluginOptions(await transport.call(path, EMPTY_MESSAGE, left));
    } catch (err) {
      const unreachable = err instanceof TransportError && err.code === GrpcStatus.UNAVAILABLE;
      if (!unreachable || clock.now() + CONNECT_RETRY_MS >= deadline) {
        throw failure(name, "GetDevicePluginOptions", err, CONNECT_TIMEOUT_MS);
      }
    }
    await clock.sleep(CONNECT_RETRY_MS);
  }
}

/** The error of a failed call: `<name>: <rpc> failed: <why>`. */
function failure(name: string, rpc: string, err: unknown, timeoutMs: number): Error {
  let why: string;
  if (!(err instanceof TransportError)) why = err instanceof Error ? err.message : String(err);
  else if (err.code === GrpcStatus.DEADLINE_EXCEEDED) {
    why = `deadline of ${timeoutMs / 1000}s exceeded`;
  } else why = err.details || `gRPC status ${err.code}`;
  return new Error(`${name}: ${rpc} failed: ${why}`, { cause: err });
}

class GrpcEndpoint implements DevicePluginEndpoint {
  /** Set by close(): the stream's end is no longer reported. */
  private closed = false;
  /** Set by the first watch(). */
  private watching = false;
  /** Ends the ListAndWatch stream at close(). */
  private readonly stream = new AbortController();

  constructor(
    readonly resourceName: string,
    readonly options: PluginOptions,
    /** `device plugin "<resource>" (<socket>)`, the start of every error. */
    private readonly name: string,
    private readonly transport: GrpcTransport,
    private readonly logger: Logger,
    private readonly opts: EndpointOptions,
  ) {}

  watch(onDevices: (devices: PluginDevice[]) => void, onEnd: (error?: Error) => void): void {
    if (this.watching) throw new Error(`${this.name}: ListAndWatch is already open`);
    this.watching = true;
    this.transport.serverStream(
      DEVICE_PLUGIN_PATHS.listAndWatch,
      EMPTY_MESSAGE,
      {
        onMessage: (message) => {
          let devices: PluginDevice[];
          try {
            devices = decodeDeviceList(message);
          } catch (err) {
            // Ends the stream with this error.
            throw new TransportError(GrpcStatus.INTERNAL, (err as Error).message);
          }
          try {
            onDevices(devices);
          } catch (err) {
            this.logger.error("The device list handler failed", { error: err });
          }
        },
        onEnd: (err) => {
          if (this.closed) return;
          onEnd(err && failure(this.name, "ListAndWatch", err, 0));
        },
      },
      this.stream.signal,
    );
  }

  async preferredAllocation(
    available: string[],
    mustInclude: string[],
    size: number,
    signal?: AbortSignal,
  ): Promise<string[]> {
    const request = encodePreferredAllocationRequest(available, mustInclude, size);
    const answer = await this.call(
      "GetPreferredAllocation",
      DEVICE_PLUGIN_PATHS.getPreferredAllocation,
      request,
      this.opts.callTimeoutMs,
      signal,
    );
    return this.decoded("GetPreferredAllocation", () => decodePreferredAllocation(answer));
  }

  async allocate(deviceIds: string[], signal?: AbortSignal): Promise<ContainerAllocation> {
    const request = encodeAllocateRequest(deviceIds);
    const path = DEVICE_PLUGIN_PATHS.allocate;
    const answer = await this.call("Allocate", path, request, this.opts.callTimeoutMs, signal);
    return this.decoded("Allocate", () => decodeAllocateResponse(answer));
  }

  async preStartContainer(deviceIds: string[], signal?: AbortSignal): Promise<void> {
    await this.call(
      "PreStartContainer",
      DEVICE_PLUGIN_PATHS.preStartContainer,
      encodePreStartRequest(deviceIds),
      PRE_START_CONTAINER_TIMEOUT_MS,
      signal,
    );
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.stream.abort();
    this.transport.close();
  }

  private async call(
    rpc: string,
    path: string,
    request: Buffer,
    timeoutMs: number,
    signal: AbortSignal | undefined,
  ): Promise<Buffer> {
    try {
      return await this.transport.call(path, request, timeoutMs, signal);
    } catch (err) {
      throw failure(this.name, rpc, err, timeoutMs);
    }
  }

  private decoded<T>(rpc: string, decode: () => T): T {
    try {
      return decode();
    } catch (err) {
      throw failure(this.name, rpc, err, 0);
    }
  }
}
