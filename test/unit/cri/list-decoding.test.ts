import { describe, expect, test } from "bun:test";
import type { MethodDefinition, ServiceDefinition } from "@grpc/proto-loader";
import { createListDecoder } from "../../../src/cri/list-decoding.ts";
import { loadCriProto } from "../../../src/cri/proto.ts";

const proto = loadCriProto();
const service = proto.definition["runtime.v1.RuntimeService"] as ServiceDefinition;
const listContainers = service.ListContainers as MethodDefinition<unknown, unknown>;
const listSandboxes = service.ListPodSandbox as MethodDefinition<unknown, unknown>;

const encodeContainers = (containers: object[]) => listContainers.responseSerialize({ containers });
const plainContainers = (buf: Buffer) => listContainers.responseDeserialize(buf);

function containerDecoder(sweepEvery?: number) {
  return createListDecoder({
    field: "containers",
    decodeResponse: listContainers.responseDeserialize,
    decodeItem: proto.decoder("runtime.v1.Container"),
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
