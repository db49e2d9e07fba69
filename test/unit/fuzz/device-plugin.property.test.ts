// Properties of the device plugin API as the agent speaks it (src/agent/cm/devicemanager/api.ts,
// registration.ts, endpoint.ts) under generated, mutated and random messages: each decoder gives
// a value or throws an Error saying which message is wrong ("malformed v1beta1.<type>", or the
// part the agent asked for missing), nothing else; valid messages decode to what they say; the
// registration server hands only checked registrations on and keeps serving a good plugin after
// each hostile request; and an endpoint to a plugin that answers with hostile bytes gives values
// or errors naming the plugin and the call, never anything else.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import {
  DEVICE_PLUGIN_PATHS,
  decodeAllocateResponse,
  decodeDeviceList,
  decodePluginOptions,
  decodePreferredAllocation,
  decodeRegisterRequest,
  devicePluginSchema,
  HEALTHY,
  REGISTER_PATH,
} from "../../../src/agent/cm/devicemanager/api.ts";
import { connectDevicePlugin } from "../../../src/agent/cm/devicemanager/endpoint.ts";
import { startRegistrationServer } from "../../../src/agent/cm/devicemanager/registration.ts";
import type { PluginDevice, Registration } from "../../../src/agent/cm/devicemanager/types.ts";
import { isExtendedResourceName } from "../../../src/api/extended-resources.ts";
import { encodeMessage } from "../../../src/cri/codec.ts";
import { startGrpcServer } from "../../../src/cri/grpc-server.ts";
import { TransportError } from "../../../src/cri/grpc-wire.ts";
import { createH2Transport } from "../../../src/cri/transport.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { fuzz, fuzzTimeout } from "../../lib/fuzz.ts";
import { message } from "../../lib/proto-arbitrary.ts";
import { mutated } from "../../lib/wire-mutations.ts";

const schema = devicePluginSchema;
const encode = (type: string, obj: unknown) => encodeMessage(schema(type), obj);

/** Each decoder, the message type it reads, and the errors it may throw. */
const DECODERS: [string, (b: Buffer) => unknown][] = [
  ["RegisterRequest", decodeRegisterRequest],
  ["DevicePluginOptions", decodePluginOptions],
  ["ListAndWatchResponse", decodeDeviceList],
  ["PreferredAllocationResponse", decodePreferredAllocation],
  ["AllocateResponse", decodeAllocateResponse],
];
const DECODE_ERROR = /^malformed v1beta1\.\w+: |^the AllocateResponse has no container response$/;

function decodeOrRefuse(decode: (b: Buffer) => unknown, bytes: Buffer): unknown {
  try {
    return decode(bytes);
  } catch (err) {
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toMatch(DECODE_ERROR);
    return undefined;
  }
}

/** [decoder index, a valid encoding of its type] */
const valid = fc
  .integer({ min: 0, max: DECODERS.length - 1 })
  .chain((i) => fc.tuple(fc.constant(i), message(schema((DECODERS[i] as [string, unknown])[0]), 1)))
  .map(([i, obj]) => [i, encode((DECODERS[i] as [string, unknown])[0], obj)] as const);

describe("the device plugin API's decoders under hostile messages", () => {
  test("mutated and random messages decode to a value or an error naming the message", async () => {
    await fuzz(
      "device-plugin-decoders",
      fc.oneof(
        valid.chain(([i, bytes]) => fc.tuple(fc.constant(i), mutated(bytes, 5))),
        fc.tuple(
          fc.integer({ min: 0, max: DECODERS.length - 1 }),
          fc.uint8Array({ maxLength: 80 }).map((b) => Buffer.from(b)),
        ),
      ),
      ([i, bytes]) => {
        decodeOrRefuse((DECODERS[i] as [string, (b: Buffer) => unknown])[1], bytes);
      },
      { seed: 30_741, runs: 1500 },
    );
  });

  test("ListAndWatch and Allocate answers decode to what they say", async () => {
    const list = message(schema("ListAndWatchResponse"), 0);
    const allocation = message(schema("AllocateResponse"), 0);
    await fuzz(
      "device-plugin-roundtrip",
      fc.tuple(list, allocation),
      ([l, a]) => {
        const devices = l.devices as {
          ID: string;
          health: string;
          topology: { nodes: { ID: number }[] } | null;
        }[];
        const want: PluginDevice[] = devices.map((d) => {
          const out: PluginDevice = { id: d.ID, healthy: d.health === HEALTHY };
          const nodes = d.topology?.nodes ?? [];
          if (nodes.length > 0) out.numaNodes = nodes.map((n) => n.ID);
          return out;
        });
        expect(decodeDeviceList(encode("ListAndWatchResponse", l))).toEqual(want);
        const first = (a.containerResponses as Record<string, unknown>[])[0];
        const bytes = encode("AllocateResponse", a);
        if (first === undefined) expect(() => decodeAllocateResponse(bytes)).toThrow();
        else {
          const got = decodeAllocateResponse(bytes);
          expect(got.envs).toEqual(first.envs as Record<string, string>);
          expect(got.annotations).toEqual(first.annotations as Record<string, string>);
          expect(got.mounts).toEqual(first.mounts as never);
          expect(got.devices).toEqual(first.devices as never);
          expect(got.cdiDevices).toEqual(
            (first.cdiDevices as { name: string }[]).map((d) => d.name),
          );
        }
      },
      { seed: 30_742, runs: 300 },
    );
  });
});

describe("device plugin registration and endpoints under hostile plugins", () => {
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-dp-fuzz-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const GOOD = {
    version: "v1beta1",
    endpoint: "good.sock",
    resourceName: "vendor.example/gpu",
    options: { preStartRequired: false, getPreferredAllocationAvailable: true },
  };

  test(
    "the registration server passes on only checked registrations, and serves a good plugin after each hostile one",
    async () => {
      const got: Registration[] = [];
      const server = await startRegistrationServer({
        socketPath: join(dir, "kubelet.sock"),
        logger: nullLogger,
        onRegister: (r) => {
          got.push(r);
        },
      });
      const plugin = createH2Transport({
        address: { unix: server.socketPath },
        maxReceiveBytes: 1 << 20,
        windowBytes: 1 << 20,
        maxHeaderListBytes: 1 << 20,
      });
      const request = fc.record({
        version: fc.constantFrom("v1beta1", "v1alpha", "", "v1beta1\0"),
        endpoint: fc.constantFrom("gpu.sock", "", ".", "..", "../x.sock", "kubelet.sock", "a\0b"),
        resourceName: fc.constantFrom(
          "vendor.example/gpu",
          "gpu",
          "kubernetes.io/gpu",
          "",
          "a/b/c",
        ),
        options: fc.option(
          fc.record({
            preStartRequired: fc.boolean(),
            getPreferredAllocationAvailable: fc.boolean(),
          }),
          { nil: null },
        ),
      });
      const hostile = fc.oneof(
        request.chain((r) => mutated(encode("RegisterRequest", r), 3)),
        fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b)),
      );
      try {
        await fuzz(
          "device-plugin-registration",
          hostile,
          async (bytes) => {
            got.length = 0;
            await plugin.call(REGISTER_PATH, bytes, 5000).catch((err) => {
              expect(err).toBeInstanceOf(TransportError);
            });
            for (const r of got) {
              expect(r.version).toBe("v1beta1");
              expect(isExtendedResourceName(r.resourceName)).toBe(true);
              expect(r.endpoint).not.toMatch(/^$|^\.\.?$|\/|\0|^kubelet\.sock$/);
            }
            got.length = 0;
            await plugin.call(REGISTER_PATH, encode("RegisterRequest", GOOD), 5000);
            expect(got).toEqual([GOOD]);
          },
          { seed: 30_743, runs: 150 },
        );
      } finally {
        plugin.close();
        server.close();
      }
    },
    fuzzTimeout(60_000),
  );

  test(
    "an endpoint to a plugin answering hostile bytes gives values or errors naming the plugin and the call",
    async () => {
      const answers = {
        options: Buffer.alloc(0),
        lists: [] as Buffer[],
        allocate: Buffer.alloc(0),
      };
      const server = await startGrpcServer({
        socketPath: join(dir, "hostile.sock"),
        unary: {
          [DEVICE_PLUGIN_PATHS.getDevicePluginOptions]: () => answers.options,
          [DEVICE_PLUGIN_PATHS.allocate]: () => answers.allocate,
          [DEVICE_PLUGIN_PATHS.getPreferredAllocation]: () => answers.allocate,
        },
        serverStreams: {
          [DEVICE_PLUGIN_PATHS.listAndWatch]: (_req, send) => {
            for (const l of answers.lists) send(l);
          },
        },
      });
      /** A valid answer of `type` a third of the time (most of the time for the options, so
       * that the calls after them are reached), else a mutated or random one. */
      const hostileOf = (type: string, validWeight = 1) =>
        fc.oneof(
          { weight: validWeight, arbitrary: message(schema(type), 1).map((m) => encode(type, m)) },
          message(schema(type), 1).chain((m) => mutated(encode(type, m), 4)),
          fc.uint8Array({ maxLength: 40 }).map((b) => Buffer.from(b)),
        );
      const NAMED = /^device plugin "vendor\.example\/gpu" \(hostile\.sock\): /;
      try {
        await fuzz(
          "device-plugin-endpoint",
          fc.record({
            options: hostileOf("DevicePluginOptions", 8),
            lists: fc.array(hostileOf("ListAndWatchResponse"), { maxLength: 3 }),
            allocate: hostileOf("AllocateResponse"),
          }),
          async (a) => {
            Object.assign(answers, a);
            const registration = { ...GOOD, endpoint: "hostile.sock" };
            const opts = { dir, logger: nullLogger, callTimeoutMs: 5000 };
            const endpoint = await connectDevicePlugin(registration, opts).catch((err: Error) => {
              expect(err.message).toMatch(NAMED);
              return undefined;
            });
            if (endpoint === undefined) return;
            try {
              const ended = new Promise<Error | undefined>((resolve) => {
                endpoint.watch(() => {}, resolve);
              });
              const error = await ended;
              if (error !== undefined) expect(error.message).toMatch(NAMED);
              for (const call of [
                () => endpoint.allocate(["d1"]),
                () => endpoint.preferredAllocation(["d1", "d2"], [], 1),
              ]) {
                await call().catch((err: Error) => expect(err.message).toMatch(NAMED));
              }
            } finally {
              endpoint.close();
            }
          },
          { seed: 30_744, runs: 40 },
        );
      } finally {
        server.close();
      }
    },
    fuzzTimeout(60_000),
  );
});
