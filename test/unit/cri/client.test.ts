// The client against a small in-process gRPC server on a unix socket (no containerd needed).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  Server,
  ServerCredentials,
  type ServerUnaryCall,
  type sendUnaryData,
  status,
} from "@grpc/grpc-js";
import type { ServiceDefinition } from "@grpc/proto-loader";
import {
  type CriClient,
  CriError,
  createCriClient,
  defaultTimeoutFor,
} from "../../../src/cri/index.ts";
import { loadCriPackageDefinition } from "../../lib/cri-proto.ts";

type Handler = (
  call: ServerUnaryCall<Record<string, unknown>, unknown>,
  cb: sendUnaryData<unknown>,
) => void;

const dir = mkdtempSync(join(tmpdir(), "fleetlet-cri-client-"));
const socket = join(dir, "cri.sock");
const server = new Server();
const received: Record<string, unknown>[] = [];
let client: CriClient;

beforeAll(async () => {
  const pkg = loadCriPackageDefinition();
  const handlers: Record<string, Handler> = {
    Version: (call, cb) => {
      received.push(call.request);
      cb(null, { version: "0.1.0", runtimeName: "test-runtime", runtimeApiVersion: "v1" });
    },
    ContainerStatus: (call, cb) =>
      cb({
        code: status.NOT_FOUND,
        details: `container ${JSON.stringify(call.request.containerId)} not found`,
      }),
    ListContainers: (_call, cb) => setTimeout(() => cb(null, { containers: [] }), 1000),
    ExecSync: (call, cb) => {
      received.push(call.request);
      cb(null, { stdout: Buffer.from("hi\n"), exitCode: 3 });
    },
  };
  server.addService(pkg["runtime.v1.RuntimeService"] as ServiceDefinition, handlers);
  await new Promise<void>((resolve, reject) =>
    server.bindAsync(`unix://${socket}`, ServerCredentials.createInsecure(), (err) =>
      err ? reject(err) : resolve(),
    ),
  );
  client = createCriClient({ endpoint: `unix://${socket}` });
});

afterAll(() => {
  client.close();
  server.forceShutdown();
  rmSync(dir, { recursive: true, force: true });
});

describe("createCriClient()", () => {
  test("sends the request and returns the response with every field present", async () => {
    const res = await client.version({ version: "v1" });
    expect(res).toEqual({
      version: "0.1.0",
      runtimeName: "test-runtime",
      runtimeVersion: "",
      runtimeApiVersion: "v1",
    });
    expect(received.at(-1)).toEqual({ version: "v1" });
  });

  test("returns bytes fields as Uint8Array and int64 request fields as numbers", async () => {
    const res = await client.execSync({ containerId: "c1", cmd: ["echo", "hi"], timeout: 5 });
    expect(new TextDecoder().decode(res.stdout)).toBe("hi\n");
    expect(res.exitCode).toBe(3);
    expect(received.at(-1)).toEqual({ containerId: "c1", cmd: ["echo", "hi"], timeout: 5 });
  });

  test("maps NOT_FOUND to a NotFound CriError naming the RPC and the runtime's message", async () => {
    const err = await client.containerStatus({ containerId: "abc" }).catch((e) => e);
    expect(err).toBeInstanceOf(CriError);
    expect(err.code).toBe("NotFound");
    expect(err.message).toBe('CRI ContainerStatus failed: container "abc" not found');
  });

  test("fails with DeadlineExceeded when the runtime does not answer in time", async () => {
    const started = performance.now();
    const err = await client.listContainers({}, { timeoutMs: 100 }).catch((e) => e);
    expect(err.code).toBe("DeadlineExceeded");
    expect(err.message).toContain("within 100 ms");
    expect(performance.now() - started).toBeLessThan(900);
  });

  test("cancels the call when the signal aborts", async () => {
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 50);
    const started = performance.now();
    const err = await client.listContainers({}, { signal: ac.signal }).catch((e) => e);
    expect(err.code).toBe("Cancelled");
    expect(performance.now() - started).toBeLessThan(900);
  });

  test("does not send a call whose signal is already aborted", async () => {
    const before = received.length;
    const err = await client.version({}, { signal: AbortSignal.abort() }).catch((e) => e);
    expect(err.code).toBe("Cancelled");
    expect(received.length).toBe(before);
  });

  test("fails fast with Unavailable when nothing listens on the socket", async () => {
    const absent = createCriClient({ endpoint: `unix://${join(dir, "absent.sock")}` });
    const started = performance.now();
    const err = await absent.version({}).catch((e) => e);
    absent.close();
    expect(err.code).toBe("Unavailable");
    expect(err.message).toContain(`runtime at unix://${join(dir, "absent.sock")} unavailable`);
    expect(performance.now() - started).toBeLessThan(2000);
  });

  test("rejects calls after close()", async () => {
    const closed = createCriClient({ endpoint: `unix://${socket}` });
    closed.close();
    closed.close();
    const err = await closed.version({}).catch((e) => e);
    expect(err.message).toContain("is closed");
  });
});

describe("createCriClient() onCall", () => {
  test("reports each call with its method, duration and error", async () => {
    const calls: { method: string; ms: number; error?: string }[] = [];
    const traced = createCriClient({
      endpoint: `unix://${socket}`,
      onCall: (method, ms, error) =>
        calls.push({ method, ms, ...(error && { error: error.code }) }),
    });
    try {
      await traced.version({});
      await traced.containerStatus({ containerId: "nope" }).catch(() => {});
    } finally {
      traced.close();
    }
    expect(calls.map((c) => [c.method, c.error])).toEqual([
      ["version", undefined],
      ["containerStatus", "NotFound"],
    ]);
    for (const c of calls) expect(c.ms).toBeGreaterThanOrEqual(0);
  });
});

describe("defaultTimeoutFor()", () => {
  const t = { defaultMs: 10_000, lifecycleMs: 120_000, pullMs: 600_000 };
  test.each([
    ["version", undefined, 10_000],
    ["listContainers", undefined, 10_000],
    ["runPodSandbox", undefined, 120_000],
    ["removeContainer", undefined, 120_000],
    ["pullImage", undefined, 600_000],
    ["stopContainer", 30, 150_000],
    ["stopContainer", undefined, 120_000],
    ["execSync", 2, 12_000],
    ["execSync", 0, 120_000],
  ] as const)("gives %s with request timeout %p s a deadline of %d ms", (method, timeout, ms) => {
    expect(defaultTimeoutFor(method, { timeout }, t)).toBe(ms);
  });
});
