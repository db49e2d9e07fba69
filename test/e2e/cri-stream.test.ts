// A server-streaming gRPC call through our transport against the real containerd (its event
// service, on the CRI socket): events arrive as they happen, and a containerd restart ends the
// stream with UNAVAILABLE. Needs root and the test bed.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse } from "protobufjs";
import eventsProto from "../../proto/containerd-events.proto" with { type: "text" };
import { buildSchemas, decodeMessage, encodeMessage } from "../../src/cri/codec.ts";
import type { GrpcTransport, TransportError } from "../../src/cri/grpc-wire.ts";
import { createCriClient, GrpcStatus, type PodSandboxConfig } from "../../src/cri/index.ts";
import { createH2Transport } from "../../src/cri/transport.ts";
import {
  eventually,
  loadTestbed,
  startContainerd,
  stopContainerd,
  uniqueName,
} from "../lib/testbed.ts";

const tb = loadTestbed();
const cri = createCriClient({ endpoint: tb.endpoint });
const logRoot = mkdtempSync(join(tmpdir(), "fleetlet-cri-stream-e2e-"));
const schemas = buildSchemas(parse(eventsProto, { keepCase: false }).root);
const schema = (name: string) => schemas.get(`containerd.services.events.v1.${name}`) as never;
const SUBSCRIBE = "/containerd.services.events.v1.Events/Subscribe";
const sandboxes: string[] = [];

afterAll(async () => {
  for (const id of sandboxes) {
    await cri.stopPodSandbox({ podSandboxId: id }).catch(() => {});
    await cri.removePodSandbox({ podSandboxId: id }).catch(() => {});
  }
  cri.close();
  rmSync(logRoot, { recursive: true, force: true });
});

interface Seen {
  topic: string;
  containerId: string;
}

function subscribe(t: GrpcTransport, signal: AbortSignal) {
  const seen: Seen[] = [];
  const request = encodeMessage(schema("SubscribeRequest"), {
    filters: ['namespace==k8s.io,topic~="^/tasks/"'],
  });
  const ended = new Promise<TransportError | undefined>((resolve) => {
    t.serverStream(
      SUBSCRIBE,
      request,
      {
        onMessage(m) {
          const env = decodeMessage(schema("Envelope"), m) as {
            topic: string;
            event: { value: Buffer };
          };
          // field 1 of every task event is the container's ID
          const task = decodeMessage(schema("TaskOOM"), env.event.value) as {
            containerId: string;
          };
          seen.push({ topic: env.topic, containerId: task.containerId });
        },
        onEnd: resolve,
      },
      signal,
    );
  });
  return { seen, ended };
}

async function exitingContainer(): Promise<string> {
  const name = uniqueName("stream");
  const config: PodSandboxConfig = {
    metadata: { name, namespace: "e2e", uid: `uid-${name}`, attempt: 0 },
    logDirectory: join(logRoot, name),
    linux: { securityContext: { namespaceOptions: { network: "NODE", pid: "CONTAINER" } } },
  };
  const { podSandboxId } = await cri.runPodSandbox({ config });
  sandboxes.push(podSandboxId);
  await cri.pullImage({ image: { image: tb.busybox } });
  const { containerId } = await cri.createContainer({
    podSandboxId,
    config: {
      metadata: { name: "c", attempt: 0 },
      image: { image: tb.busybox },
      command: ["sh", "-c", "exit 3"],
      logPath: "c.log",
    },
    sandboxConfig: config,
  });
  await cri.startContainer({ containerId });
  return containerId;
}

function options() {
  return { address: { unix: tb.socket }, maxReceiveBytes: 1 << 20, windowBytes: 1 << 20 };
}

describe("containerd's event stream through our transport (needs root and the test bed)", () => {
  test("a task's start and exit arrive as they happen; a containerd restart ends the stream with UNAVAILABLE, and a new one works", async () => {
    const t = createH2Transport(options());
    const ac = new AbortController();
    try {
      const first = subscribe(t, ac.signal);
      await Bun.sleep(100);
      const id = await exitingContainer();
      await eventually("the container's exit event", () =>
        first.seen.some((e) => e.topic === "/tasks/exit" && e.containerId === id),
      );
      expect(first.seen.some((e) => e.topic === "/tasks/start" && e.containerId === id)).toBe(true);
      await stopContainerd(tb);
      startContainerd();
      expect((await first.ended)?.code).toBe(GrpcStatus.UNAVAILABLE);
      const second = await eventually("a new stream after the restart", async () => {
        const s = subscribe(t, ac.signal);
        const early = await Promise.race([s.ended, Bun.sleep(300).then(() => "open" as const)]);
        return early === "open" ? s : undefined;
      });
      const id2 = await exitingContainer();
      await eventually("the exit event on the new stream", () =>
        second.seen.some((e) => e.topic === "/tasks/exit" && e.containerId === id2),
      );
    } finally {
      ac.abort();
      t.close();
    }
  }, 60_000);
});
