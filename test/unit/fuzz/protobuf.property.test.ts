// Properties of the protobuf codec of the CRI messages (src/cri/codec-*.ts), the list decoder that
// reuses unchanged items (list-decoding.ts) and the gRPC message framing (grpc-wire.ts):
// generated messages of several CRI types round-trip through encode and decode; arbitrary and
// mutated encodings decode to a message or throw an Error naming the type ("malformed <type>:"),
// never another error; a length beyond the input is refused as such, whatever its size (nothing is
// allocated for it); the list decoder gives what the plain decoder gives on any sequence of
// responses; and gRPC framing hands out only the messages framed, none beyond its limit.
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { decodeMessage, encodeMessage, type MessageSchema } from "../../../src/cri/codec.ts";
import { frameMessage, MessageReader, TransportError } from "../../../src/cri/grpc-wire.ts";
import { createListDecoder } from "../../../src/cri/list-decoding.ts";
import { loadCriProto } from "../../../src/cri/proto.ts";
import { fuzz } from "../../lib/fuzz.ts";
import { message } from "../../lib/proto-arbitrary.ts";
import { mutated, splits } from "../../lib/wire-mutations.ts";

const proto = loadCriProto();
const schema = (name: string) => proto.schemas.get(name) as MessageSchema;
const TYPES = [
  "runtime.v1.ContainerConfig",
  "runtime.v1.PodSandboxConfig",
  "runtime.v1.ContainerStatusResponse",
  "runtime.v1.ListContainersResponse",
  "runtime.v1.ListPodSandboxResponse",
  "runtime.v1.ContainerStatsResponse",
  "runtime.v1.PullImageRequest",
  "runtime.v1.ExecSyncResponse",
];

/** Decodes `bytes` as `s`; undefined when refused with the decoder's error (any other throws). */
function decodeOrRefuse(s: MessageSchema, bytes: Buffer): Record<string, unknown> | undefined {
  try {
    return decodeMessage(s, bytes);
  } catch (err) {
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toStartWith("malformed ");
    return undefined;
  }
}

const typed = fc
  .constantFrom(...TYPES)
  .chain((name) => fc.tuple(fc.constant(name), message(schema(name))));

describe("the CRI codec under generated and hostile messages", () => {
  test("encode then decode gives back any message of several CRI types", async () => {
    await fuzz(
      "protobuf-roundtrip",
      typed,
      ([name, obj]) => {
        expect(decodeMessage(schema(name), encodeMessage(schema(name), obj))).toEqual(obj);
      },
      { seed: 30_711, runs: 200 },
    );
  });

  test("mutated encodings decode to a message or a 'malformed <type>' error", async () => {
    await fuzz(
      "protobuf-mutated",
      typed.chain(([name, obj]) =>
        fc.tuple(fc.constant(name), mutated(encodeMessage(schema(name), obj), 6)),
      ),
      ([name, bytes]) => {
        decodeOrRefuse(schema(name), bytes);
      },
      { seed: 30_712, runs: 500 },
    );
  });

  test("arbitrary bytes decode to a message or a 'malformed <type>' error", async () => {
    await fuzz(
      "protobuf-bytes",
      fc.tuple(fc.constantFrom(...TYPES), fc.uint8Array({ maxLength: 120 })),
      ([name, bytes]) => {
        decodeOrRefuse(schema(name), Buffer.from(bytes));
      },
      { seed: 30_713, runs: 2000 },
    );
  });

  test("a length beyond the input is refused as such, however large", async () => {
    // ContainerConfig: field 2 (image, a message), 3 (command, strings), 16 (annotations, a map).
    const varint = (n: number) => {
      const out: number[] = [];
      while (n >= 0x80) {
        out.push((n % 0x80) | 0x80);
        n = Math.floor(n / 0x80);
      }
      return [...out, n];
    };
    await fuzz(
      "protobuf-length",
      fc.tuple(
        fc.constantFrom(2, 3, 16, 99),
        fc.oneof(fc.integer({ min: 1, max: 100 }), fc.integer({ min: 1, max: 2 ** 49 })),
        fc.uint8Array({ maxLength: 20 }),
      ),
      ([field, extra, tail]) => {
        const bytes = Buffer.from([
          ...varint((field << 3) | 2),
          ...varint(tail.length + extra),
          ...tail,
        ]);
        expect(() => decodeMessage(schema("runtime.v1.ContainerConfig"), bytes)).toThrow(
          /malformed runtime\.v1\.ContainerConfig: a length runs past the end/,
        );
      },
      { seed: 30_714, runs: 500 },
    );
  });
});

describe("the CRI codec under parts that overrun their own length", () => {
  const varint = (n: number) => {
    const out: number[] = [];
    while (n >= 0x80) {
      out.push((n % 0x80) | 0x80);
      n = Math.floor(n / 0x80);
    }
    return [...out, n];
  };
  /** `fields` (each a field's bytes) as a part of declared length `len`, then the rest. */
  const part = (no: number, fields: number[][], len: number) => [
    ...varint((no << 3) | 2),
    ...varint(len),
    ...fields.flat(),
  ];
  /** Lengths that end a part inside one of its fields (not at a boundary between them). */
  const inside = (fields: number[][]) => {
    const bounds = new Set([0]);
    let at = 0;
    for (const f of fields) {
      at += f.length;
      bounds.add(at);
    }
    return fc.integer({ min: 1, max: at - 1 }).filter((n) => !bounds.has(n));
  };

  test("a map entry or a packed run that runs past its length is refused", async () => {
    const config = schema("runtime.v1.ContainerConfig");
    const labels = config.fields.find((f) => f.name === "labels")?.no as number;
    const security = schema("runtime.v1.LinuxContainerSecurityContext");
    const groups = security.fields.find((f) => f.name === "supplementalGroups")?.no as number;
    const someBytes = fc.uint8Array({ minLength: 1, maxLength: 6 }).map((b) => [...b]);
    const mapCase = fc
      .tuple(someBytes, someBytes)
      .map(([k, v]) => [
        [0x0a, k.length, ...k],
        [0x12, v.length, ...v],
      ])
      .chain((fields) => inside(fields).map((len) => ["map", part(labels, fields, len)] as const));
    const packedCase = fc
      .array(fc.integer({ min: 128, max: 2 ** 31 - 1 }).map(varint), { minLength: 1, maxLength: 4 })
      .chain((fields) =>
        inside(fields).map((len) => ["packed", part(groups, fields, len)] as const),
      );
    await fuzz(
      "protobuf-overrun",
      fc.oneof(mapCase, packedCase),
      ([kind, b]) => {
        const s = kind === "map" ? config : security;
        expect(() => decodeMessage(s, Buffer.from(b))).toThrow(/^malformed /);
      },
      { seed: 30_717, runs: 500 },
    );
  });
});

describe("the list decoder under sequences of hostile responses", () => {
  const name = "runtime.v1.ListContainersResponse";
  const plain = (buf: Buffer) => decodeMessage(schema(name), buf);
  /** Containers of a few IDs, so that items recur from one response to the next. */
  const containers = fc.array(
    fc.tuple(fc.constantFrom("a", "b", "c"), message(schema("runtime.v1.Container"), 2)),
    { maxLength: 3 },
  );
  const responses = fc.array(
    containers.chain((items) => {
      const bytes = encodeMessage(schema(name), {
        containers: items.map(([id, c]) => ({ ...c, id })),
      });
      return fc.oneof(fc.constant(bytes), mutated(bytes, 3));
    }),
    { minLength: 1, maxLength: 6 },
  );

  test("gives what the plain decoder gives, or fails where it fails", async () => {
    await fuzz(
      "protobuf-list-decoder",
      responses,
      (bufs) => {
        const list = createListDecoder({
          field: "containers",
          decodeResponse: plain,
          decodeItem: proto.decoder("runtime.v1.Container"),
          mapFields: proto.mapFields("runtime.v1.Container"),
          sweepEvery: 3,
        });
        for (const buf of bufs) {
          const want = decodeOrRefuse(schema(name), buf);
          if (want === undefined) expect(() => list(buf)).toThrow(/^malformed /);
          else expect(list(buf)).toEqual(want);
        }
      },
      { seed: 30_715, runs: 200 },
    );
  });
});

describe("gRPC message framing under hostile bodies", () => {
  test("hands out exactly the messages framed, split anywhere, and refuses one past the limit from its header", async () => {
    const LIMIT = 64;
    const body = fc
      .array(
        fc.oneof(
          fc.uint8Array({ maxLength: 80 }).map((m) => ({ m, bytes: frameMessage(m) })),
          fc
            .tuple(
              fc.integer({ min: LIMIT + 1, max: 2 ** 32 - 1 }),
              fc.uint8Array({ maxLength: 8 }),
            )
            .map(([n, m]) => {
              const bytes = Buffer.concat([frameMessage(m), Buffer.alloc(0)]);
              bytes.writeUInt32BE(n, 1);
              return { m: undefined, bytes };
            }),
        ),
        { maxLength: 5 },
      )
      .chain((parts) =>
        fc.tuple(fc.constant(parts), splits(Buffer.concat(parts.map((p) => p.bytes)))),
      );
    await fuzz(
      "grpc-framing",
      body,
      ([parts, chunks]) => {
        const reader = new MessageReader(LIMIT);
        const got: Buffer[] = [];
        let error: TransportError | undefined;
        for (const chunk of chunks) {
          const out = reader.push(chunk);
          if (out instanceof TransportError) {
            error = out;
            break;
          }
          got.push(...out);
        }
        const firstBad = parts.findIndex((p) => p.m === undefined || p.m.length > LIMIT);
        const good: Buffer[] = (firstBad < 0 ? parts : parts.slice(0, firstBad)).map((p) =>
          Buffer.from(p.m as Uint8Array),
        );
        if (firstBad >= 0) {
          // Those before the refused one, as far as the chunks before its header completed them.
          expect(good.slice(0, got.length)).toEqual(got);
          expect(error?.message).toMatch(/response larger than the limit of 64 bytes/);
        } else {
          expect(got).toEqual(good);
          expect(error).toBeUndefined();
          expect(reader.finish()).toBeUndefined();
        }
      },
      { seed: 30_716, runs: 800 },
    );
  });
});
