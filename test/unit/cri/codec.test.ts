import { describe, expect, test } from "bun:test";
import { parse, type Type } from "protobufjs";
import { decodeMessage, encodeMessage, type MessageSchema } from "../../../src/cri/codec.ts";
import { tableOf } from "../../../src/cri/proto-macro.ts";
import { linkSchemas } from "../../../src/cri/proto-table.ts";
import { criProtoText } from "../../lib/cri-proto.ts";
import { prng } from "../../lib/prng.ts";

// protobufjs is the reference: the objects @grpc/proto-loader gives, from the same proto.
const OPTIONS = { longs: Number, enums: String, defaults: true, oneofs: true };
const { root } = parse(criProtoText(), { keepCase: false });
// The schemas as the client links them from the build-time table (proto-macro.ts).
const schemas = linkSchemas(tableOf(root));
const names = [...schemas.keys()];
const typeOf = (name: string) => root.lookupType(name) as Type;

const STRINGS = ["", "a", "web", "io.kubernetes.pod.name", "é日本😀", "x".repeat(200), "a\u0000b"];
const LONGS = [
  0,
  1,
  -1,
  127,
  128,
  300,
  2 ** 31 - 1,
  -(2 ** 31),
  2 ** 32 + 5,
  2 ** 53 - 1,
  -(2 ** 52),
];

/** A random object of a message type, in the shapes the agent passes and protobufjs accepts. */
function randomObject(
  schema: MessageSchema,
  rand: () => number,
  depth = 0,
): Record<string, unknown> {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;
  const out: Record<string, unknown> = {};
  const value = (f: MessageSchema["fields"][number], kind = f.kind): unknown => {
    switch (kind) {
      case "string":
        return pick(STRINGS);
      case "bool":
        return rand() < 0.5;
      case "int32":
        return pick([0, 1, -1, 2 ** 31 - 1, -(2 ** 31), 65535]);
      case "uint32":
        return pick([0, 1, 255, 2 ** 32 - 1, 2 ** 31]);
      case "int64":
        return pick(LONGS);
      case "uint64":
        return pick(LONGS.filter((n) => n >= 0));
      case "double":
        return pick([0, 1.5, -2.25, 1e300, Number.NaN, 0.1]);
      case "bytes":
        return Buffer.from(pick(STRINGS));
      case "enum": {
        const known = [...(f.enumNumbers?.keys() ?? [])];
        return rand() < 0.8 ? pick(known) : pick([0, 1, 7]);
      }
      case "message":
        return depth > 3 ? {} : randomObject(f.message as MessageSchema, rand, depth + 1);
    }
  };
  for (const f of schema.fields) {
    if (rand() < 0.35) continue;
    if (f.mapKey !== undefined) {
      const n = Math.floor(rand() * 4);
      out[f.name] = Object.fromEntries(
        Array.from({ length: n }, (_, i) => [`k${i}${pick(STRINGS)}`, value(f)]),
      );
    } else if (f.repeated) {
      out[f.name] = Array.from({ length: Math.floor(rand() * 4) }, () => value(f));
    } else {
      out[f.name] = value(f);
    }
  }
  return out;
}

describe("CRI codec against protobufjs", () => {
  test("knows every message type of the proto", () => {
    expect(names.length).toBeGreaterThan(100);
    expect(schemas.get("runtime.v1.ContainerConfig")?.fields.length).toBeGreaterThan(10);
  });

  test("encodes every message type as protobufjs reads it", () => {
    const rand = prng(7);
    for (const name of names) {
      const schema = schemas.get(name) as MessageSchema;
      const T = typeOf(name);
      for (let i = 0; i < 25; i++) {
        const obj = randomObject(schema, rand);
        const theirs = T.toObject(T.decode(encodeMessage(schema, obj)), OPTIONS);
        expect({ name, obj: theirs }).toEqual({
          name,
          obj: T.toObject(T.fromObject(obj), OPTIONS),
        });
      }
    }
  });

  test("decodes every message type as protobufjs does", () => {
    const rand = prng(11);
    for (const name of names) {
      const schema = schemas.get(name) as MessageSchema;
      const T = typeOf(name);
      for (let i = 0; i < 25; i++) {
        const bytes = Buffer.from(T.encode(T.fromObject(randomObject(schema, rand))).finish());
        expect({ name, obj: decodeMessage(schema, bytes) }).toEqual({
          name,
          obj: T.toObject(T.decode(bytes), OPTIONS),
        });
      }
    }
  });

  test("reads unpacked repeated numbers, skips unknown fields, and takes the last of a repeated scalar", () => {
    const schema = schemas.get("runtime.v1.LinuxContainerSecurityContext") as MessageSchema;
    const groups = schema.fields.find((f) => f.name === "supplementalGroups");
    expect(groups?.no).toBeDefined();
    const no = groups?.no as number;
    // supplementalGroups 5 and 6 unpacked, unknown fields 99 (a varint) and 100 (two bytes),
    // then runAsUsername twice.
    const user = schema.fields.find((f) => f.name === "runAsUsername")?.no as number;
    const bytes = Buffer.from([
      ...[no << 3, 5, no << 3, 6],
      ...[0x98, 0x06, 1, 0xa2, 0x06, 2, 0x61, 0x61],
      ...[(user << 3) | 2, 1, 0x61, (user << 3) | 2, 1, 0x62],
    ]);
    const T = typeOf("runtime.v1.LinuxContainerSecurityContext");
    const ours = decodeMessage(schema, bytes);
    expect(ours.supplementalGroups).toEqual([5, 6]);
    expect(ours.runAsUsername).toBe("b");
    expect(ours).toEqual(T.toObject(T.decode(bytes), OPTIONS));
  });

  test("refuses a message that runs past its end, naming the type", () => {
    const schema = schemas.get("runtime.v1.ContainerStatusRequest") as MessageSchema;
    expect(() => decodeMessage(schema, Buffer.from([0x0a, 0x05, 0x61]))).toThrow(
      "malformed runtime.v1.ContainerStatusRequest: a length runs past the end",
    );
    expect(() => decodeMessage(schema, Buffer.from([0x10, 0xff]))).toThrow(/a varint runs past/);
  });

  test("refuses a non-array for a repeated field, as protobufjs does", () => {
    const schema = schemas.get("runtime.v1.ExecSyncRequest") as MessageSchema;
    expect(() => encodeMessage(schema, { cmd: "ls" })).toThrow(
      ".runtime.v1.ExecSyncRequest.cmd: array expected",
    );
  });
});
