// The Registration service on kubelet.sock, called by the test device plugin over our own gRPC
// stack: checked registrations reach onRegister, refused ones get the kubelet's texts; and the
// removal of stale sockets from the device plugin folder at start.
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { devicePluginSchema, REGISTER_PATH } from "../../../../src/agent/cm/devicemanager/api.ts";
import {
  removeStaleSockets,
  startRegistrationServer,
} from "../../../../src/agent/cm/devicemanager/registration.ts";
import type { Registration } from "../../../../src/agent/cm/devicemanager/types.ts";
import { encodeMessage } from "../../../../src/cri/codec.ts";
import { GrpcStatus } from "../../../../src/cri/errors.ts";
import { TransportError } from "../../../../src/cri/grpc-wire.ts";
import { createH2Transport } from "../../../../src/cri/transport.ts";
import { nullLogger } from "../../../../src/util/log.ts";
import { TestDevicePlugin, type TestDevicePluginOptions } from "../../../lib/device-plugin.ts";

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c();
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "dpr-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A registration server in a new folder; what onRegister got. */
async function serve(onRegister?: (r: Registration) => Promise<void> | void) {
  const dir = tempDir();
  const got: Registration[] = [];
  const server = await startRegistrationServer({
    socketPath: join(dir, "kubelet.sock"),
    logger: nullLogger,
    onRegister: async (r) => {
      got.push(r);
      await onRegister?.(r);
    },
  });
  cleanups.push(() => server.close());
  return { dir, got };
}

function plugin(dir: string, o: Partial<TestDevicePluginOptions> = {}): TestDevicePlugin {
  return new TestDevicePlugin({
    dir,
    socketName: "gpu.sock",
    resourceName: "vendor.example/gpu",
    devices: [],
    ...o,
  });
}

async function refusal(p: Promise<unknown>): Promise<string> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(Error);
  return (err as Error).message;
}

describe("startRegistrationServer()", () => {
  test("hands a checked registration to onRegister, options included", async () => {
    const { dir, got } = await serve();
    await plugin(dir, { preStartRequired: true, preferredAvailable: false }).register();
    expect(got).toEqual([
      {
        version: "v1beta1",
        endpoint: "gpu.sock",
        resourceName: "vendor.example/gpu",
        options: { preStartRequired: true, getPreferredAllocationAvailable: false },
      },
    ]);
  });

  test("makes the device plugin folder when it is missing", async () => {
    const dir = join(tempDir(), "device-plugins");
    const server = await startRegistrationServer({
      socketPath: join(dir, "kubelet.sock"),
      logger: nullLogger,
      onRegister: () => {},
    });
    cleanups.push(() => server.close());
    await plugin(dir).register();
  });

  const refused: [string, Partial<TestDevicePluginOptions>, string][] = [
    [
      "an unsupported version",
      { apiVersion: "v1alpha" },
      'requested API version "v1alpha" is not supported by kubelet. Supported version is ["v1beta1"]',
    ],
    ["a name without a domain", { resourceName: "gpu" }, 'the ResourceName "gpu" is invalid'],
    [
      "a name in kubernetes.io",
      { resourceName: "kubernetes.io/gpu" },
      'the ResourceName "kubernetes.io/gpu" is invalid',
    ],
    [
      "a name in a kubernetes.io subdomain",
      { resourceName: "node.kubernetes.io/gpu" },
      'the ResourceName "node.kubernetes.io/gpu" is invalid',
    ],
    [
      "a quota name",
      { resourceName: "requests.vendor.example/gpu" },
      'the ResourceName "requests.vendor.example/gpu" is invalid',
    ],
    ["an empty name", { resourceName: "" }, 'the ResourceName "" is invalid'],
  ];
  test.each(refused)("refuses %s with the kubelet's text", async (_what, o, text) => {
    const { dir, got } = await serve();
    expect(await refusal(plugin(dir, o).register())).toBe(text);
    expect(got).toEqual([]);
  });

  test.each(["", ".", "..", "../gpu.sock", "sub/gpu.sock", "/tmp/gpu.sock", "kubelet.sock"])(
    "refuses the endpoint %p, which is not a plugin socket's name in the folder",
    async (endpoint) => {
      const { dir, got } = await serve();
      const message = await refusal(plugin(dir, { socketName: endpoint }).register());
      expect(message).toStartWith(`the Endpoint ${JSON.stringify(endpoint)} is invalid`);
      expect(got).toEqual([]);
    },
  );

  test("ends a refused call with status UNKNOWN and the text as its message", async () => {
    const { dir } = await serve();
    const t = createH2Transport({
      address: { unix: join(dir, "kubelet.sock") },
      maxReceiveBytes: 1 << 20,
      windowBytes: 1 << 20,
      maxHeaderListBytes: 1 << 20,
    });
    cleanups.push(() => t.close());
    const request = encodeMessage(devicePluginSchema("RegisterRequest"), {
      version: "v1beta1",
      endpoint: "x.sock",
      resourceName: "gpu",
    });
    const err = await t.call(REGISTER_PATH, request, 5000).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransportError);
    expect((err as TransportError).code).toBe(GrpcStatus.UNKNOWN);
    expect((err as TransportError).details).toBe('the ResourceName "gpu" is invalid');
  });

  test("fails the registration with onRegister's message when it throws", async () => {
    const { dir, got } = await serve(() => {
      throw new Error('device plugin "vendor.example/gpu" (gpu.sock): unreachable');
    });
    expect(await refusal(plugin(dir).register())).toBe(
      'device plugin "vendor.example/gpu" (gpu.sock): unreachable',
    );
    expect(got).toHaveLength(1);
  });

  test("refuses a request that is not a RegisterRequest with a clear message", async () => {
    const { dir, got } = await serve();
    const t = createH2Transport({
      address: { unix: join(dir, "kubelet.sock") },
      maxReceiveBytes: 1 << 20,
      windowBytes: 1 << 20,
      maxHeaderListBytes: 1 << 20,
    });
    cleanups.push(() => t.close());
    const err = await t.call(REGISTER_PATH, Buffer.from([0x0a, 0x05, 0x61]), 5000).catch((e) => e);
    expect((err as TransportError).code).toBe(GrpcStatus.INVALID_ARGUMENT);
    expect((err as TransportError).details).toStartWith("malformed v1beta1.RegisterRequest");
    expect(got).toEqual([]);
  });
});

describe("removeStaleSockets()", () => {
  test("removes every socket in the folder and keeps other files and folders", async () => {
    const dir = tempDir();
    const listeners = ["kubelet.sock", "old-gpu.sock"].map((name) =>
      Bun.listen({ unix: join(dir, name), socket: { data() {} } }),
    );
    cleanups.push(() => {
      for (const l of listeners) l.stop(true);
    });
    writeFileSync(join(dir, "kubelet_internal_checkpoint"), "{}");
    writeFileSync(join(dir, "notes.sock"), "not a socket");
    mkdirSync(join(dir, "sub"));

    const removed = removeStaleSockets(dir, nullLogger);

    expect(removed.sort()).toEqual(["kubelet.sock", "old-gpu.sock"]);
    expect(existsSync(join(dir, "kubelet.sock"))).toBe(false);
    expect(existsSync(join(dir, "old-gpu.sock"))).toBe(false);
    expect(existsSync(join(dir, "kubelet_internal_checkpoint"))).toBe(true);
    expect(existsSync(join(dir, "notes.sock"))).toBe(true);
    expect(existsSync(join(dir, "sub"))).toBe(true);
  });

  test("does nothing when the folder does not exist yet", () => {
    expect(removeStaleSockets(join(tempDir(), "missing"), nullLogger)).toEqual([]);
  });
});
