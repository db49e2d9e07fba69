import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  CHECKPOINT_FILE,
  type DeviceCheckpoint,
  decodeCheckpoint,
  encodeCheckpoint,
  readCheckpoint,
  writeCheckpoint,
} from "../../../../src/agent/cm/devicemanager/checkpoint.ts";
import { allocationFor } from "../../../lib/fake-device-endpoint.ts";

const SERIAL = "fleetlet.io/serial";

const sample: DeviceCheckpoint = {
  entries: [
    {
      podUid: "uid-1",
      containerName: "app",
      resourceName: SERIAL,
      deviceIds: ["ttyUSB0", "ttyUSB1"],
      deviceIdsByNuma: { "0": ["ttyUSB0"], "1": ["ttyUSB1"] },
      allocation: {
        ...allocationFor(SERIAL, ["ttyUSB0", "ttyUSB1"]),
        mounts: [{ containerPath: "/etc/x", hostPath: "/etc/y", readOnly: true }],
        annotations: { a: "b" },
        cdiDevices: ["vendor.example/serial=0"],
      },
    },
  ],
  registeredDevices: { [SERIAL]: ["ttyUSB0", "ttyUSB1", "ttyUSB2"] },
};

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "fleetlet-devckpt-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe("device checkpoint", () => {
  test("decodes what it encodes", () => {
    expect(decodeCheckpoint(encodeCheckpoint(sample))).toEqual(sample);
  });

  test("has the kubelet's shape, with the allocation as JSON and a CRC-32 of the Data text", () => {
    const text = encodeCheckpoint(sample);
    const file = JSON.parse(text);
    expect(Object.keys(file)).toEqual(["Data", "Checksum"]);
    expect(file.Data.PodDeviceEntries[0]).toEqual({
      PodUID: "uid-1",
      ContainerName: "app",
      ResourceName: SERIAL,
      DeviceIDs: { "0": ["ttyUSB0"], "1": ["ttyUSB1"] },
      AllocResp: sample.entries[0]?.allocation,
    });
    expect(file.Data.RegisteredDevices).toEqual(sample.registeredDevices);
    expect(file.Checksum).toBe(Bun.hash.crc32(JSON.stringify(file.Data)));
  });

  test("a device with no NUMA node is under -1, and read back once", () => {
    const text = encodeCheckpoint({
      entries: [
        {
          ...(sample.entries[0] as DeviceCheckpoint["entries"][0]),
          deviceIdsByNuma: { "-1": ["a"], "0": ["a"] },
        },
      ],
      registeredDevices: {},
    });
    expect(decodeCheckpoint(text).entries[0]?.deviceIds).toEqual(["a"]);
  });

  test("is written in the folder with mode 0644 and read back", () => {
    writeCheckpoint(dir, sample);
    const path = join(dir, CHECKPOINT_FILE);
    expect(statSync(path).mode & 0o777).toBe(0o644);
    expect(existsSync(`${path}.tmp`)).toBe(false);
    expect(readCheckpoint(dir)).toEqual({ checkpoint: sample });
  });

  test("no file means nothing allocated and nothing registered", () => {
    expect(readCheckpoint(dir)).toEqual({ checkpoint: { entries: [], registeredDevices: {} } });
  });

  test("empty lists written as null (as Go writes them) are read as empty", () => {
    const data = JSON.stringify({ PodDeviceEntries: null, RegisteredDevices: null });
    const text = `{"Data":${data},"Checksum":${Bun.hash.crc32(data)}}`;
    expect(decodeCheckpoint(text)).toEqual({ entries: [], registeredDevices: {} });
  });

  const good = encodeCheckpoint(sample);
  const kubeletData = JSON.stringify({
    PodDeviceEntries: [
      {
        PodUID: "u",
        ContainerName: "c",
        ResourceName: SERIAL,
        DeviceIDs: { "-1": ["a"] },
        AllocResp: "CgQKAkZPEgA=",
      },
    ],
    RegisteredDevices: {},
  });
  test.each([
    { what: "not JSON", text: "{not json", why: "it is not JSON" },
    { what: "truncated", text: good.slice(0, good.length / 2), why: "it is not JSON" },
    { what: "without a checksum", text: '{"Data":{}}', why: "it has the wrong shape: Checksum" },
    {
      what: "with a wrong checksum",
      text: good.replace("ttyUSB2", "ttyUSB9"),
      why: "its checksum",
    },
    {
      what: "with a protobuf allocation (the kubelet's own file)",
      text: `{"Data":${kubeletData},"Checksum":${Bun.hash.crc32(kubeletData)}}`,
      why: "it has the wrong shape: Data.PodDeviceEntries.0.AllocResp",
    },
  ])("a file $what is reported and moved aside", ({ text, why }) => {
    const path = join(dir, CHECKPOINT_FILE);
    writeFileSync(path, text);
    const read = readCheckpoint(dir);
    expect(read.checkpoint).toEqual({ entries: [], registeredDevices: {} });
    expect(read.problem).toContain(`device checkpoint ${path} cannot be used: ${why}`);
    expect(read.problem).toContain(`moved to ${path}.corrupt`);
    expect(existsSync(path)).toBe(false);
    expect(readFileSync(`${path}.corrupt`, "utf8")).toBe(text);
  });
});
