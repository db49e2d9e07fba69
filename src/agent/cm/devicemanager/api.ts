// The device plugin API v1beta1 (proto/deviceplugin.proto) as the agent speaks it: its constants,
// the RPC paths, and the messages the agent receives (decoded into types.ts's shapes) and sends
// (encoded from plain arguments), through the codec of the embedded protos.
//
// Invariants:
// - Decoding never fails on a missing field: proto3 gives it its default ("", false, none).
// - A message that is not valid protobuf, or an answer without the part the agent asked for,
//   throws an Error saying which message and what is wrong; nothing else is thrown.

import { decodeMessage, encodeMessage, type MessageSchema } from "../../../cri/codec.ts";
import { loadCriProto } from "../../../cri/proto.ts";
import type { ContainerAllocation, PluginDevice, PluginOptions, Registration } from "./types.ts";

/** The API version the agent speaks, and the versions it accepts from plugins. */
export const DEVICE_PLUGIN_API_VERSION = "v1beta1";
export const SUPPORTED_VERSIONS: readonly string[] = [DEVICE_PLUGIN_API_VERSION];
/** The registration socket's file name in the device plugin folder. */
export const KUBELET_SOCKET = "kubelet.sock";
/** A device's health in ListAndWatch; anything but HEALTHY counts as unhealthy. */
export const HEALTHY = "Healthy";
export const UNHEALTHY = "Unhealthy";
/** The kubelet's deadline of PreStartContainer. */
export const PRE_START_CONTAINER_TIMEOUT_MS = 30_000;
/** How long a newly registered plugin has to answer GetDevicePluginOptions (the kubelet's
 * deadline to reach it). */
export const CONNECT_TIMEOUT_MS = 10_000;

const PACKAGE = "v1beta1";

/** The RPC paths ("/v1beta1.Service/Method"). */
export const REGISTER_PATH = `/${PACKAGE}.Registration/Register`;
export const DEVICE_PLUGIN_PATHS = {
  getDevicePluginOptions: `/${PACKAGE}.DevicePlugin/GetDevicePluginOptions`,
  listAndWatch: `/${PACKAGE}.DevicePlugin/ListAndWatch`,
  getPreferredAllocation: `/${PACKAGE}.DevicePlugin/GetPreferredAllocation`,
  allocate: `/${PACKAGE}.DevicePlugin/Allocate`,
  preStartContainer: `/${PACKAGE}.DevicePlugin/PreStartContainer`,
} as const;

/** The Empty message (no field): zero bytes. */
export const EMPTY_MESSAGE: Buffer = Buffer.alloc(0);

/** The schemas of the package's messages, linked once on first use (constant data). */
let linked: ReadonlyMap<string, MessageSchema> | undefined;

/** The schema of `type` ("Device"), in the v1beta1 package. */
export function devicePluginSchema(type: string): MessageSchema {
  linked ??= loadCriProto().schemas;
  const s = linked.get(`${PACKAGE}.${type}`);
  if (s === undefined) throw new Error(`The embedded protos have no message ${PACKAGE}.${type}`);
  return s;
}

// The decoded objects' shapes (codec.ts: every field present, absent messages null).
interface RawOptions {
  preStartRequired: boolean;
  getPreferredAllocationAvailable: boolean;
}
interface RawDevice {
  ID: string;
  health: string;
  topology: { nodes: { ID: number }[] } | null;
}
interface RawContainerAllocation {
  envs: Record<string, string>;
  mounts: { containerPath: string; hostPath: string; readOnly: boolean }[];
  devices: { containerPath: string; hostPath: string; permissions: string }[];
  annotations: Record<string, string>;
  cdiDevices: { name: string }[];
}

function decode<T>(type: string, buf: Buffer): T {
  return decodeMessage(devicePluginSchema(type), buf) as T;
}

function options(raw: RawOptions | null): PluginOptions {
  return {
    preStartRequired: raw?.preStartRequired ?? false,
    getPreferredAllocationAvailable: raw?.getPreferredAllocationAvailable ?? false,
  };
}

/** A RegisterRequest as sent, not yet checked (registration.ts checks it). */
export function decodeRegisterRequest(buf: Buffer): Registration {
  const r = decode<{
    version: string;
    endpoint: string;
    resourceName: string;
    options: RawOptions | null;
  }>("RegisterRequest", buf);
  return {
    version: r.version,
    endpoint: r.endpoint,
    resourceName: r.resourceName,
    options: options(r.options),
  };
}

/** GetDevicePluginOptions' answer. */
export function decodePluginOptions(buf: Buffer): PluginOptions {
  return options(decode<RawOptions>("DevicePluginOptions", buf));
}

/** One ListAndWatch message: the plugin's full device list. */
export function decodeDeviceList(buf: Buffer): PluginDevice[] {
  const { devices } = decode<{ devices: RawDevice[] }>("ListAndWatchResponse", buf);
  return devices.map((d) => {
    const device: PluginDevice = { id: d.ID, healthy: d.health === HEALTHY };
    const nodes = d.topology?.nodes ?? [];
    if (nodes.length > 0) device.numaNodes = nodes.map((n) => n.ID);
    return device;
  });
}

/** GetPreferredAllocation for one container. */
export function encodePreferredAllocationRequest(
  available: readonly string[],
  mustInclude: readonly string[],
  size: number,
): Buffer {
  return encodeMessage(devicePluginSchema("PreferredAllocationRequest"), {
    containerRequests: [
      { availableDeviceIDs: available, mustIncludeDeviceIDs: mustInclude, allocationSize: size },
    ],
  });
}

/** The ids the plugin prefers for the one container asked about; none when it gave no answer
 * for it (the caller then chooses itself). */
export function decodePreferredAllocation(buf: Buffer): string[] {
  const r = decode<{ containerResponses: { deviceIDs: string[] }[] }>(
    "PreferredAllocationResponse",
    buf,
  );
  return r.containerResponses[0]?.deviceIDs ?? [];
}

/** Allocate for one container's devices. */
export function encodeAllocateRequest(deviceIds: readonly string[]): Buffer {
  return encodeMessage(devicePluginSchema("AllocateRequest"), {
    containerRequests: [{ devicesIds: deviceIds }],
  });
}

/** What Allocate gives the one container asked about (the first container response, as the
 * kubelet takes it); throws when the answer has none. */
export function decodeAllocateResponse(buf: Buffer): ContainerAllocation {
  const r = decode<{ containerResponses: RawContainerAllocation[] }>("AllocateResponse", buf);
  const c = r.containerResponses[0];
  if (c === undefined) throw new Error("the AllocateResponse has no container response");
  return {
    envs: { ...c.envs },
    mounts: c.mounts.map((m) => ({
      containerPath: m.containerPath,
      hostPath: m.hostPath,
      readOnly: m.readOnly,
    })),
    devices: c.devices.map((d) => ({
      containerPath: d.containerPath,
      hostPath: d.hostPath,
      permissions: d.permissions,
    })),
    annotations: { ...c.annotations },
    cdiDevices: c.cdiDevices.map((d) => d.name),
  };
}

/** PreStartContainer with one container's devices. */
export function encodePreStartRequest(deviceIds: readonly string[]): Buffer {
  return encodeMessage(devicePluginSchema("PreStartContainerRequest"), { devicesIds: deviceIds });
}
