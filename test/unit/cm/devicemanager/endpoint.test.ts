// The gRPC endpoint of a registered device plugin, against the test device plugin on its socket:
// the options check at connect, the device list stream, each call and its answer decoded, the
// deadlines, a list of 10,000 devices, malformed answers, and close().
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEVICE_PLUGIN_PATHS } from "../../../../src/agent/cm/devicemanager/api.ts";
import {
  connectDevicePlugin,
  type EndpointOptions,
} from "../../../../src/agent/cm/devicemanager/endpoint.ts";
import type {
  DevicePluginEndpoint,
  PluginDevice,
  Registration,
} from "../../../../src/agent/cm/devicemanager/types.ts";
import { startGrpcServer } from "../../../../src/cri/grpc-server.ts";
import { FakeClock } from "../../../../src/util/clock.ts";
import { createLogger, nullLogger } from "../../../../src/util/log.ts";
import { TestDevicePlugin, type TestDevicePluginOptions } from "../../../lib/device-plugin.ts";
import { until } from "../../../lib/until.ts";

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c();
});

const RESOURCE = "vendor.example/gpu";
const NAME = `device plugin "${RESOURCE}" (gpu.sock)`;

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "dpe-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function registration(o: Partial<Registration["options"]> = {}): Registration {
  return {
    version: "v1beta1",
    endpoint: "gpu.sock",
    resourceName: RESOURCE,
    options: { preStartRequired: false, getPreferredAllocationAvailable: false, ...o },
  };
}

const twoDevices = [
  { id: "gpu0", healthy: true },
  { id: "gpu1", healthy: true },
];

async function startPlugin(o: Partial<TestDevicePluginOptions> = {}, dir = tempDir()) {
  const p = new TestDevicePlugin({
    dir,
    socketName: "gpu.sock",
    resourceName: RESOURCE,
    devices: twoDevices,
    ...o,
  });
  await p.start();
  cleanups.push(() => p.stop());
  return p;
}

async function connect(
  dir: string,
  r = registration(),
  o: Partial<EndpointOptions> = {},
): Promise<DevicePluginEndpoint> {
  const e = await connectDevicePlugin(r, { dir, logger: nullLogger, callTimeoutMs: 5000, ...o });
  cleanups.push(() => e.close());
  return e;
}

async function rejection(p: Promise<unknown>): Promise<string> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(Error);
  return (err as Error).message;
}

/** Starts watch(): the lists it got, and its end. */
function watching(e: DevicePluginEndpoint) {
  const lists: PluginDevice[][] = [];
  let ended: { error?: Error } | undefined;
  e.watch(
    (devices) => lists.push(devices),
    (error) => {
      ended = { error };
    },
  );
  return { lists, ended: () => ended };
}

describe("connectDevicePlugin()", () => {
  test("takes the plugin's options from its GetDevicePluginOptions answer", async () => {
    const p = await startPlugin({ preStartRequired: true, preferredAvailable: true });
    const e = await connect(p.options.dir, registration({ preStartRequired: true }));
    expect(e.resourceName).toBe(RESOURCE);
    expect(e.options).toEqual({ preStartRequired: true, getPreferredAllocationAvailable: true });
  });

  test("logs an answer that differs from the registration's options", async () => {
    const p = await startPlugin({ preStartRequired: false });
    const lines: string[] = [];
    await connect(p.options.dir, registration({ preStartRequired: true }), {
      logger: createLogger({ write: (l) => lines.push(l) }),
    });
    expect(lines.join("\n")).toContain("differ from its registration");
  });

  test("waits for a plugin whose socket listens only after it registered", async () => {
    const dir = tempDir();
    const clock = new FakeClock();
    const connecting = connect(dir, registration(), { clock });
    await until("a retry to wait", () => clock.pending > 0);
    await startPlugin({}, dir);
    clock.step(100);
    const e = await connecting;
    expect(e.options.preStartRequired).toBe(false);
  });

  test("rejects naming the plugin when nothing answers on its socket within 10 s", async () => {
    const dir = tempDir();
    const clock = new FakeClock();
    const connecting = rejection(connect(dir, registration(), { clock }));
    await until("a retry to wait", () => clock.pending > 0);
    clock.step(10_000);
    expect(await connecting).toStartWith(`${NAME}: GetDevicePluginOptions failed: `);
  });

  test("rejects naming the plugin when its GetDevicePluginOptions fails", async () => {
    const dir = tempDir();
    const server = await startGrpcServer({ socketPath: join(dir, "gpu.sock"), unary: {} });
    cleanups.push(() => server.close());
    expect(await rejection(connect(dir))).toBe(
      `${NAME}: GetDevicePluginOptions failed: unknown method ${DEVICE_PLUGIN_PATHS.getDevicePluginOptions}`,
    );
  });
});

describe("endpoint.watch()", () => {
  test("hands over the first list, then a new list at each health change", async () => {
    const p = await startPlugin({
      devices: [
        { id: "gpu0", healthy: true, numaNodes: [0, 1] },
        { id: "gpu1", healthy: true },
      ],
    });
    const w = watching(await connect(p.options.dir));
    await until("the first list", () => w.lists.length === 1);
    expect(w.lists[0]).toEqual([
      { id: "gpu0", healthy: true, numaNodes: [0, 1] },
      { id: "gpu1", healthy: true },
    ]);
    p.setHealth("gpu1", false);
    await until("the second list", () => w.lists.length === 2);
    expect(w.lists[1]?.map((d) => [d.id, d.healthy])).toEqual([
      ["gpu0", true],
      ["gpu1", false],
    ]);
    p.setDevices([{ id: "gpu2", healthy: true }]);
    await until("the third list", () => w.lists.length === 3);
    expect(w.lists[2]).toEqual([{ id: "gpu2", healthy: true }]);
    expect(w.ended()).toBeUndefined();
  });

  test("lists 10,000 devices", async () => {
    const devices = Array.from({ length: 10_000 }, (_, i) => ({
      id: `GPU-${String(i).padStart(8, "0")}-4820-abfc-e83e-94318197576e`,
      healthy: i % 7 !== 0,
      numaNodes: [i % 4],
    }));
    const p = await startPlugin({ devices });
    const w = watching(await connect(p.options.dir));
    await until("the list", () => w.lists.length === 1, 30_000);
    expect(w.lists[0]).toEqual(devices);
  });

  test("takes a list larger than gRPC's usual 4 MiB limit", async () => {
    // 70,000 ids of 63 characters, the API's longest: about 5.7 MB.
    const devices = Array.from({ length: 70_000 }, (_, i) => ({
      id: String(i).padStart(63, "d"),
      healthy: true,
      numaNodes: [0],
    }));
    const p = await startPlugin({ devices });
    const w = watching(await connect(p.options.dir));
    await until("the list", () => w.lists.length === 1 || w.ended() !== undefined, 30_000);
    expect(w.ended()).toBeUndefined();
    expect(w.lists[0]).toHaveLength(70_000);
    expect(w.lists[0]?.[69_999]?.id).toBe(devices[69_999]?.id);
  });

  test("ends with an error naming the plugin when the plugin stops", async () => {
    const p = await startPlugin();
    const w = watching(await connect(p.options.dir));
    await until("the first list", () => w.lists.length === 1);
    p.stop();
    await until("the end", () => w.ended() !== undefined);
    expect(w.ended()?.error?.message).toStartWith(`${NAME}: ListAndWatch failed: `);
  });

  test("ends with a clear error on a list that is not a ListAndWatchResponse", async () => {
    const dir = tempDir();
    const server = await startGrpcServer({
      socketPath: join(dir, "gpu.sock"),
      unary: { [DEVICE_PLUGIN_PATHS.getDevicePluginOptions]: () => Buffer.alloc(0) },
      serverStreams: {
        [DEVICE_PLUGIN_PATHS.listAndWatch]: async (_req, send) => {
          send(Buffer.from([0x0a, 0x7f, 0x0a]));
          await Bun.sleep(60_000);
        },
      },
    });
    cleanups.push(() => server.close());
    const w = watching(await connect(dir));
    await until("the end", () => w.ended() !== undefined);
    expect(w.ended()?.error?.message).toBe(
      `${NAME}: ListAndWatch failed: malformed v1beta1.ListAndWatchResponse: a length runs past the end`,
    );
    expect(w.lists).toEqual([]);
  });

  test("close() ends the stream without calling onEnd", async () => {
    const p = await startPlugin();
    const e = await connect(p.options.dir);
    const w = watching(e);
    await until("the stream to open", () => p.openStreams === 1 && w.lists.length === 1);
    e.close();
    await until("the plugin to see the stream end", () => p.openStreams === 0);
    expect(w.ended()).toBeUndefined();
  });
});

describe("endpoint calls", () => {
  test("preferredAllocation() asks about one container and returns the plugin's choice", async () => {
    const p = await startPlugin({
      preferredAvailable: true,
      preferred: (available, mustInclude, size) =>
        [...mustInclude, ...available.filter((id) => !mustInclude.includes(id)).reverse()].slice(
          0,
          size,
        ),
    });
    const e = await connect(p.options.dir);
    expect(await e.preferredAllocation(["a", "b", "c", "d"], ["b"], 2)).toEqual(["b", "d"]);
    expect(p.preferred).toEqual([{ available: ["a", "b", "c", "d"], mustInclude: ["b"], size: 2 }]);
  });

  test("allocate() decodes the whole answer: envs, mounts, device nodes, annotations, CDI", async () => {
    const p = await startPlugin({
      envsFor: (ids) => ({ GPU_IDS: ids.join(",") }),
      deviceNodes: (ids) =>
        ids.map((id) => ({
          containerPath: `/dev/${id}`,
          hostPath: `/dev/${id}`,
          permissions: "rw",
        })),
      allocationFor: () => ({
        mounts: [{ containerPath: "/usr/lib/gpu", hostPath: "/opt/gpu/lib", readOnly: true }],
        annotations: { "vendor.example/gpu": "gpu0,gpu1" },
        cdiDevices: ["vendor.example/gpu=gpu0", "vendor.example/gpu=gpu1"],
      }),
    });
    const e = await connect(p.options.dir);
    expect(await e.allocate(["gpu0", "gpu1"])).toEqual({
      envs: { GPU_IDS: "gpu0,gpu1" },
      mounts: [{ containerPath: "/usr/lib/gpu", hostPath: "/opt/gpu/lib", readOnly: true }],
      devices: [
        { containerPath: "/dev/gpu0", hostPath: "/dev/gpu0", permissions: "rw" },
        { containerPath: "/dev/gpu1", hostPath: "/dev/gpu1", permissions: "rw" },
      ],
      annotations: { "vendor.example/gpu": "gpu0,gpu1" },
      cdiDevices: ["vendor.example/gpu=gpu0", "vendor.example/gpu=gpu1"],
    });
    expect(p.allocations).toEqual([["gpu0", "gpu1"]]);
  });

  test("allocate() of a plugin that answers nothing gives empty parts", async () => {
    const p = await startPlugin();
    const e = await connect(p.options.dir);
    expect(await e.allocate(["gpu0"])).toEqual({
      envs: {},
      mounts: [],
      devices: [],
      annotations: {},
      cdiDevices: [],
    });
  });

  test("preStartContainer() passes the container's devices", async () => {
    const p = await startPlugin({ preStartRequired: true });
    const e = await connect(p.options.dir);
    await e.preStartContainer(["gpu1"]);
    expect(p.preStarts).toEqual([["gpu1"]]);
  });

  test("allocate() of a plugin that hangs ends at callTimeoutMs with the deadline error", async () => {
    const p = await startPlugin({ hangAllocate: true });
    const e = await connect(p.options.dir, registration(), { callTimeoutMs: 200 });
    expect(await rejection(e.allocate(["gpu0"]))).toBe(
      `${NAME}: Allocate failed: deadline of 0.2s exceeded`,
    );
  });

  test("allocate() stops when its signal aborts", async () => {
    const p = await startPlugin({ hangAllocate: true });
    const e = await connect(p.options.dir);
    const abort = new AbortController();
    const allocating = rejection(e.allocate(["gpu0"], abort.signal));
    await until("the plugin to get the call", () => p.allocations.length === 1);
    abort.abort();
    expect(await allocating).toBe(`${NAME}: Allocate failed: cancelled by the caller`);
  });

  test("calls reject with a clear error on a malformed or empty answer", async () => {
    const dir = tempDir();
    const server = await startGrpcServer({
      socketPath: join(dir, "gpu.sock"),
      unary: {
        [DEVICE_PLUGIN_PATHS.getDevicePluginOptions]: () => Buffer.alloc(0),
        [DEVICE_PLUGIN_PATHS.allocate]: () => Buffer.alloc(0),
        [DEVICE_PLUGIN_PATHS.getPreferredAllocation]: () => Buffer.from([0x0a, 0x09]),
      },
    });
    cleanups.push(() => server.close());
    const e = await connect(dir);
    expect(await rejection(e.allocate(["gpu0"]))).toBe(
      `${NAME}: Allocate failed: the AllocateResponse has no container response`,
    );
    expect(await rejection(e.preferredAllocation(["gpu0"], [], 1))).toBe(
      `${NAME}: GetPreferredAllocation failed: malformed v1beta1.PreferredAllocationResponse: a length runs past the end`,
    );
    expect(await rejection(e.preStartContainer(["gpu0"]))).toBe(
      `${NAME}: PreStartContainer failed: unknown method ${DEVICE_PLUGIN_PATHS.preStartContainer}`,
    );
  });

  test("calls after close() reject naming the plugin", async () => {
    const p = await startPlugin();
    const e = await connect(p.options.dir);
    e.close();
    expect(await rejection(e.allocate(["gpu0"]))).toBe(
      `${NAME}: Allocate failed: the client is closed`,
    );
  });
});
