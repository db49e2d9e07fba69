// proto/deviceplugin.proto against the v1beta1 wire format (field numbers and types written down
// here a second time), and the agent's decoding of the messages it receives: bytes as another
// implementation writes them, fields left out (proto3 defaults), malformed messages.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse, type Type } from "protobufjs";
import {
  DEVICE_PLUGIN_PATHS,
  decodeAllocateResponse,
  decodeDeviceList,
  decodePluginOptions,
  decodePreferredAllocation,
  decodeRegisterRequest,
  REGISTER_PATH,
} from "../../../../src/agent/cm/devicemanager/api.ts";
import { loadCriProto } from "../../../../src/cri/proto.ts";
import { repoRoot } from "../../../lib/testbed.ts";

const root = parse(readFileSync(join(repoRoot, "proto/deviceplugin.proto"), "utf8"), {
  keepCase: true,
}).root;

describe("proto/deviceplugin.proto", () => {
  test.each([
    ["DevicePluginOptions", "pre_start_required", 1, "bool"],
    ["DevicePluginOptions", "get_preferred_allocation_available", 2, "bool"],
    ["RegisterRequest", "version", 1, "string"],
    ["RegisterRequest", "endpoint", 2, "string"],
    ["RegisterRequest", "resource_name", 3, "string"],
    ["RegisterRequest", "options", 4, "DevicePluginOptions"],
    ["ListAndWatchResponse", "devices", 1, "Device"],
    ["TopologyInfo", "nodes", 1, "NUMANode"],
    ["NUMANode", "ID", 1, "int64"],
    ["Device", "ID", 1, "string"],
    ["Device", "health", 2, "string"],
    ["Device", "topology", 3, "TopologyInfo"],
    ["PreStartContainerRequest", "devices_ids", 1, "string"],
    ["PreferredAllocationRequest", "container_requests", 1, "ContainerPreferredAllocationRequest"],
    ["ContainerPreferredAllocationRequest", "available_deviceIDs", 1, "string"],
    ["ContainerPreferredAllocationRequest", "must_include_deviceIDs", 2, "string"],
    ["ContainerPreferredAllocationRequest", "allocation_size", 3, "int32"],
    [
      "PreferredAllocationResponse",
      "container_responses",
      1,
      "ContainerPreferredAllocationResponse",
    ],
    ["ContainerPreferredAllocationResponse", "deviceIDs", 1, "string"],
    ["AllocateRequest", "container_requests", 1, "ContainerAllocateRequest"],
    ["ContainerAllocateRequest", "devices_ids", 1, "string"],
    ["CDIDevice", "name", 1, "string"],
    ["AllocateResponse", "container_responses", 1, "ContainerAllocateResponse"],
    ["ContainerAllocateResponse", "envs", 1, "string"],
    ["ContainerAllocateResponse", "mounts", 2, "Mount"],
    ["ContainerAllocateResponse", "devices", 3, "DeviceSpec"],
    ["ContainerAllocateResponse", "annotations", 4, "string"],
    ["ContainerAllocateResponse", "cdi_devices", 5, "CDIDevice"],
    ["Mount", "container_path", 1, "string"],
    ["Mount", "host_path", 2, "string"],
    ["Mount", "read_only", 3, "bool"],
    ["DeviceSpec", "container_path", 1, "string"],
    ["DeviceSpec", "host_path", 2, "string"],
    ["DeviceSpec", "permissions", 3, "string"],
  ])("v1beta1.%s.%s has field number %d and type %s", (message, name, id, type) => {
    const f = (root.lookupType(`v1beta1.${message}`) as Type).fields[name];
    expect(f?.id).toBe(id);
    expect(f?.type).toBe(type);
  });

  test("declares every RPC the agent calls, at the paths it calls them", () => {
    const proto = loadCriProto();
    const paths = [
      proto.rpc("Registration", "Register", "v1beta1").path,
      ...["GetDevicePluginOptions", "ListAndWatch", "GetPreferredAllocation", "Allocate"]
        .concat("PreStartContainer")
        .map((m) => proto.rpc("DevicePlugin", m, "v1beta1").path),
    ];
    expect(paths).toEqual([REGISTER_PATH, ...Object.values(DEVICE_PLUGIN_PATHS)]);
  });

  test("its messages live beside the CRI's of the same short name", () => {
    const { schemas } = loadCriProto();
    expect(schemas.get("v1beta1.Device")?.fields.map((f) => f.name)).toEqual([
      "ID",
      "health",
      "topology",
    ]);
    expect(schemas.get("runtime.v1.Device")?.fields.map((f) => f.name)).toEqual([
      "containerPath",
      "hostPath",
      "permissions",
    ]);
  });
});

describe("decoding what plugins send", () => {
  test("reads a device list written byte by byte", () => {
    // devices { ID: "a" health: "Healthy" topology { nodes { ID: 1 } } } devices { ID: "b" }
    const healthy = [...Buffer.from("Healthy")];
    const bytes = Buffer.from([
      ...[0x0a, 0x12, 0x0a, 0x01, 0x61, 0x12, 0x07, ...healthy, 0x1a, 0x04, 0x0a, 0x02, 0x08, 0x01],
      ...[0x0a, 0x03, 0x0a, 0x01, 0x62],
    ]);
    expect(decodeDeviceList(bytes)).toEqual([
      { id: "a", healthy: true, numaNodes: [1] },
      { id: "b", healthy: false },
    ]);
  });

  test("gives left-out fields their proto3 defaults", () => {
    const empty = Buffer.alloc(0);
    expect(decodeDeviceList(empty)).toEqual([]);
    expect(decodePluginOptions(empty)).toEqual({
      preStartRequired: false,
      getPreferredAllocationAvailable: false,
    });
    expect(decodeRegisterRequest(empty)).toEqual({
      version: "",
      endpoint: "",
      resourceName: "",
      options: { preStartRequired: false, getPreferredAllocationAvailable: false },
    });
    expect(decodePreferredAllocation(empty)).toEqual([]);
    // container_responses { } : one container, nothing in it
    expect(decodeAllocateResponse(Buffer.from([0x0a, 0x00]))).toEqual({
      envs: {},
      mounts: [],
      devices: [],
      annotations: {},
      cdiDevices: [],
    });
  });

  test.each([
    ["a length past the end", Buffer.from([0x0a, 0x05, 0x0a])],
    ["a truncated varint", Buffer.from([0x0a, 0x80])],
    ["an unknown wire type", Buffer.from([0x0f])],
  ])("throws naming the message on %s", (_what, bytes) => {
    expect(() => decodeDeviceList(bytes)).toThrow(/^malformed v1beta1\.ListAndWatchResponse: /);
  });
});
