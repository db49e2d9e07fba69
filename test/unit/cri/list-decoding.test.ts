import { describe, expect, test } from "bun:test";
import type { MethodDefinition, ServiceDefinition } from "@grpc/proto-loader";
import { createListDecoder } from "../../../src/cri/list-decoding.ts";
import { loadCriProto } from "../../../src/cri/proto.ts";
import { loadCriPackageDefinition } from "../../lib/cri-proto.ts";

// The decoder under test uses the CRI client's codec; protobufjs (through proto-loader) encodes
// the responses and gives the plain reading to compare with.
const proto = loadCriProto();
const service = loadCriPackageDefinition()["runtime.v1.RuntimeService"] as ServiceDefinition;
const listContainers = service.ListContainers as MethodDefinition<unknown, unknown>;
const listSandboxes = service.ListPodSandbox as MethodDefinition<unknown, unknown>;

const encodeContainers = (containers: object[]) => listContainers.responseSerialize({ containers });
const plainContainers = (buf: Buffer) => listContainers.responseDeserialize(buf);

function containerDecoder(sweepEvery?: number) {
  return createListDecoder({
    field: "containers",
    decodeResponse: listContainers.responseDeserialize,
    decodeItem: proto.decoder("runtime.v1.Container"),
    mapFields: proto.mapFields("runtime.v1.Container"),
    ...(sweepEvery !== undefined ? { sweepEvery } : {}),
  });
}

function container(i: number, state = "CONTAINER_RUNNING") {
  return {
    id: `${i}`.padStart(64, "c"),
    podSandboxId: `${i}`.padStart(64, "s"),
    metadata: { name: `app${i}`, attempt: i % 3 },
    image: { image: "sha256:abc", annotations: { "kubernetes.io/config.source": "file" } },
    imageRef: "sha256:abc",
    state,
    createdAt: 1_795_950_426_430_206_000 + i,
    labels: { "io.kubernetes.pod.uid": `uid-${i}`, "io.kubernetes.container.name": `app${i}` },
    annotations: {
      "io.kubernetes.container.hash": "d884d3a0",
      "io.kubernetes.container.restartCount": "2",
    },
  };
}

type Listed = { containers: { id: string; state: string; labels: Record<string, string> }[] };

describe("list response decoding with reuse of unchanged items", () => {
  test("gives what the plain decoder gives, first and again", () => {
    const decode = containerDecoder();
    const buf = encodeContainers([container(1), container(2), container(3)]);
    expect(decode(buf)).toEqual(plainContainers(buf));
    expect(decode(buf)).toEqual(plainContainers(buf));
    expect(decode.stats()).toEqual({ decoded: 3, reused: 3 });
  });

  test("returns the same objects for unchanged items, in any order", () => {
    const decode = containerDecoder();
    const first = decode(encodeContainers([container(1), container(2)])) as Listed;
    const again = decode(encodeContainers([container(2), container(1)])) as Listed;
    expect(again.containers[0]).toBe(first.containers[1]);
    expect(again.containers[1]).toBe(first.containers[0]);
  });

  test("decodes an item afresh when its bytes changed", () => {
    const decode = containerDecoder();
    decode(encodeContainers([container(1), container(2)]));
    const buf = encodeContainers([container(1, "CONTAINER_EXITED"), container(2)]);
    const out = decode(buf) as Listed;
    expect(out.containers[0]?.state).toBe("CONTAINER_EXITED");
    expect(out).toEqual(plainContainers(buf) as Listed);
    expect(decode.stats()).toEqual({ decoded: 3, reused: 1 });
  });

  test("reuses an item whose map entries come in another order, as containerd sends them", () => {
    const decode = containerDecoder();
    const a = container(1);
    const swapped = {
      ...a,
      labels: Object.fromEntries(Object.entries(a.labels).reverse()),
      annotations: Object.fromEntries(Object.entries(a.annotations).reverse()),
    };
    const first = encodeContainers([a]);
    const second = encodeContainers([swapped]);
    expect(second.equals(first)).toBe(false); // same content, other bytes
    const one = decode(first) as Listed;
    const two = decode(second) as Listed;
    expect(two.containers[0]).toBe(one.containers[0] as Listed["containers"][number]);
    expect(two).toEqual(plainContainers(second) as Listed);
    expect(decode.stats()).toEqual({ decoded: 1, reused: 1 });
  });

  test("decodes afresh when a map value changed, even to one of the same length", () => {
    const decode = containerDecoder();
    const a = container(1);
    decode(encodeContainers([a]));
    const changed = {
      ...a,
      annotations: { ...a.annotations, "io.kubernetes.container.restartCount": "3" },
    };
    const buf = encodeContainers([changed]);
    const out = decode(buf) as Listed & {
      containers: { annotations: Record<string, string> }[];
    };
    expect(out.containers[0]?.annotations["io.kubernetes.container.restartCount"]).toBe("3");
    expect(out).toEqual(plainContainers(buf) as typeof out);
    expect(decode.stats()).toEqual({ decoded: 2, reused: 0 });
  });

  test("decodes afresh when an entry moved from labels to annotations", () => {
    const decode = containerDecoder();
    const a = { ...container(1), labels: { x: "1", y: "2" }, annotations: { z: "3" } };
    const b = { ...container(1), labels: { x: "1" }, annotations: { z: "3", y: "2" } };
    decode(encodeContainers([a]));
    const buf = encodeContainers([b]);
    expect(buf.length).toBe(encodeContainers([a]).length);
    expect(decode(buf)).toEqual(plainContainers(buf));
    expect(decode.stats()).toEqual({ decoded: 2, reused: 0 });
  });

  test("an item with a repeated map key is reused only for the same bytes", () => {
    const decode = containerDecoder();
    // Container { id = "c1" (field 1); labels (field 8) k=v<a>, then k=v<b> }: the last one wins.
    const label = (digit: string) =>
      Buffer.from([0x42, 0x07, 0x0a, 0x01, 0x6b, 0x12, 0x02, 0x76, digit.charCodeAt(0)]);
    const id = Buffer.from([0x0a, 0x02, 0x63, 0x31]);
    const item = (a: string, b: string) => {
      const body = Buffer.concat([id, label(a), label(b)]);
      return Buffer.concat([Buffer.from([0x0a, body.length]), body]);
    };
    const ab = item("1", "2");
    const ba = item("2", "1");
    const plainAb = plainContainers(ab) as Listed;
    expect(plainAb.containers[0]?.labels).toEqual({ k: "v2" });
    expect(decode(ab)).toEqual(plainAb);
    expect(decode(ab)).toEqual(plainAb);
    const outBa = decode(ba) as Listed;
    expect(outBa.containers[0]?.labels).toEqual({ k: "v1" });
    expect(outBa).toEqual(plainContainers(ba) as Listed);
    expect(decode.stats()).toEqual({ decoded: 2, reused: 1 });
  });

  test("items handed out are frozen, nested maps too", () => {
    const decode = containerDecoder();
    const out = decode(encodeContainers([container(1)])) as Listed;
    const item = out.containers[0] as Listed["containers"][number];
    expect(() => {
      item.state = "CONTAINER_EXITED";
    }).toThrow(TypeError);
    expect(() => {
      item.labels.x = "y";
    }).toThrow(TypeError);
  });

  test("an empty response is an empty list", () => {
    const decode = containerDecoder();
    expect(decode(Buffer.alloc(0))).toEqual({ containers: [] });
    expect(plainContainers(Buffer.alloc(0))).toEqual({ containers: [] });
  });

  test("an item without an ID (not starting with field 1) is decoded the plain way", () => {
    const decode = containerDecoder();
    // one item holding only pod_sandbox_id (field 2) = "abc", then a whole container
    const noId = Buffer.from([0x0a, 0x05, 0x12, 0x03, 0x61, 0x62, 0x63]);
    const buf = Buffer.concat([noId, encodeContainers([container(2)])]);
    expect((plainContainers(buf) as Listed).containers.length).toBe(2);
    expect(decode(buf)).toEqual(plainContainers(buf));
    expect(decode(buf)).toEqual(plainContainers(buf));
    expect(decode.stats()).toEqual({ decoded: 3, reused: 1 });
  });

  test("a response with another field goes to the plain decoder", () => {
    const decode = containerDecoder();
    const items = encodeContainers([container(1)]);
    // field 15, varint 1: unknown to the reader, skipped by the plain decoder
    const buf = Buffer.concat([items, Buffer.from([0x78, 0x01])]);
    expect(decode(buf)).toEqual(plainContainers(buf));
    expect(decode.stats()).toEqual({ decoded: 0, reused: 0 });
  });

  test("a truncated response is left to the plain decoder, which refuses it", () => {
    const decode = containerDecoder();
    const buf = encodeContainers([container(1)]).subarray(0, 40);
    expect(() => plainContainers(buf)).toThrow();
    expect(() => decode(buf)).toThrow();
  });

  test("items not seen for a while are forgotten", () => {
    const decode = containerDecoder(2);
    const one = encodeContainers([container(1)]);
    const other = encodeContainers([container(2)]);
    decode(one); // decoded
    decode(one); // reused
    for (let i = 0; i < 4; i++) decode(other); // container 1 unseen for 4 decodes
    decode(one); // decoded again
    expect(decode.stats()).toEqual({ decoded: 3, reused: 4 });
  });

  test("sandboxes decode as the plain decoder does", () => {
    const decode = createListDecoder({
      field: "items",
      decodeResponse: listSandboxes.responseDeserialize,
      decodeItem: proto.decoder("runtime.v1.PodSandbox"),
      mapFields: proto.mapFields("runtime.v1.PodSandbox"),
    });
    const items = [1, 2].map((i) => ({
      id: `${i}`.padStart(64, "s"),
      metadata: { name: `pod${i}`, uid: `uid-${i}`, namespace: "default", attempt: 1 },
      state: i === 1 ? "SANDBOX_READY" : "SANDBOX_NOTREADY",
      createdAt: 1_795_950_412_592_387_000,
      labels: { "io.kubernetes.pod.uid": `uid-${i}` },
      annotations: {},
      runtimeHandler: "",
    }));
    const buf = listSandboxes.responseSerialize({ items });
    expect(decode(buf)).toEqual(listSandboxes.responseDeserialize(buf));
    expect(decode(buf)).toEqual(listSandboxes.responseDeserialize(buf));
    expect(decode.stats()).toEqual({ decoded: 2, reused: 2 });
  });
});
