// The real handlers against servers of our own on loopback (no root needed).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createServer } from "node:net";
import { createProbeHandler, type ProbeTarget } from "../../../src/agent/prober/index.ts";
import type { Probe } from "../../../src/api/types.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";
import {
  type GRPCHealthServer,
  type HTTPProbeServer,
  selfSignedCert,
  startGRPCHealthServer,
  startHTTPProbeServer,
} from "../../lib/probe-servers.ts";

let http: HTTPProbeServer;
let https: HTTPProbeServer;
let grpc: GRPCHealthServer;
const never = new AbortController().signal;

beforeAll(async () => {
  http = startHTTPProbeServer();
  https = startHTTPProbeServer(selfSignedCert());
  grpc = await startGRPCHealthServer();
  grpc.statuses.set("down", 2);
});
afterAll(async () => {
  http.stop();
  https.stop();
  await grpc.stop();
});

function target(ports: { name: string; containerPort: number }[] = []): ProbeTarget {
  const container = makeContainer({ name: "web", ports });
  return {
    pod: makePod({ containers: [container] }),
    container,
    containerId: "c1",
    host: "127.0.0.1",
  };
}

const run = (probe: Probe, t = target(), timeoutMs = 1000) =>
  createProbeHandler({ cri: { execSync: () => Promise.reject(new Error("no exec here")) } })(
    probe,
    t,
    timeoutMs,
    never,
  );

describe("httpGet probe handler", () => {
  test("a 200 is a success and the request carries the probe's headers", async () => {
    const o = await run({
      httpGet: {
        port: http.port,
        path: "/healthz",
        httpHeaders: [{ name: "X-Probe", value: "yes" }],
      },
    });
    expect(o.result).toBe("success");
    const req = http.seen.findLast((r) => r.path === "/healthz");
    expect(req?.headers["x-probe"]).toBe("yes");
    expect(req?.headers["user-agent"]).toStartWith("fleetlet-probe/");
  });

  test("a 500 is a failure naming the status code", async () => {
    const o = await run({ httpGet: { port: http.port, path: "/fail" } });
    expect(o).toEqual({ result: "failure", output: "HTTP probe failed with statuscode: 500" });
  });

  test("a port by name resolves to the container port; an unknown name is a failure naming it", async () => {
    const t = target([{ name: "http", containerPort: http.port }]);
    expect((await run({ httpGet: { port: "http", path: "/healthz" } }, t)).result).toBe("success");
    const bad = await run({ httpGet: { port: "nope", path: "/" } }, t).catch((e: Error) => e);
    expect(String(bad instanceof Error ? bad.message : bad.output)).toContain('"nope"');
  });

  test("HTTPS with a self-signed certificate is a success (no verification)", async () => {
    const o = await run({ httpGet: { port: https.port, path: "/healthz", scheme: "HTTPS" } });
    expect(o.result).toBe("success");
  });

  test("a server that never answers is a failure at the timeout", async () => {
    const o = await run({ httpGet: { port: http.port, path: "/hang" } }, target(), 300);
    expect(o.result).toBe("failure");
    expect(o.output).toContain("timeout");
  });

  test("a redirect on the same host is followed; one to another host is a success with a warning", async () => {
    expect((await run({ httpGet: { port: http.port, path: "/same" } })).result).toBe("success");
    const away = await run({ httpGet: { port: http.port, path: "/away" } });
    expect(away.result).toBe("success");
    expect(away.warning).toBe(true);
    expect(away.output).toStartWith("Probe terminated redirects");
    const loop = await run({ httpGet: { port: http.port, path: "/loop" } });
    expect(loop.output).toContain("stopped after 10 redirects");
  });

  test("a huge body is read only up to 10 KiB", async () => {
    const o = await run({ httpGet: { port: http.port, path: "/big" } });
    expect(o.result).toBe("success");
    expect(o.output.length).toBe(10 * 1024);
  });

  test("a connection closed without an answer is a failure with a message", async () => {
    const srv = createServer((s) => s.destroy());
    await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
    const port = (srv.address() as { port: number }).port;
    const o = await run({ httpGet: { port, path: "/" } });
    srv.close();
    expect(o.result).toBe("failure");
    expect(o.output).toStartWith(`Get "http://127.0.0.1:${port}/": `);
  });
});

describe("tcpSocket and grpc probe handlers", () => {
  test("tcpSocket succeeds on a listening port and fails naming the address on a closed one", async () => {
    expect((await run({ tcpSocket: { port: http.port } })).result).toBe("success");
    const o = await run({ tcpSocket: { port: 1 } });
    expect(o.result).toBe("failure");
    expect(o.output).toStartWith("dial tcp 127.0.0.1:1: ");
  });

  test("grpc Health/Check: SERVING succeeds, NOT_SERVING and an unknown service fail", async () => {
    expect((await run({ grpc: { port: grpc.port } })).result).toBe("success");
    const down = await run({ grpc: { port: grpc.port, service: "down" } });
    expect(down).toEqual({
      result: "failure",
      output: 'service unhealthy (responded with "NOT_SERVING")',
    });
    expect((await run({ grpc: { port: grpc.port, service: "other" } })).result).toBe("failure");
  });

  test("grpc: a closed port, a server that is not gRPC and one that never answers each fail with a message", async () => {
    const closed = await run({ grpc: { port: 1 } });
    expect(closed.result).toBe("failure");
    expect(closed.output).toStartWith('failed to connect service "127.0.0.1:1" within 1s: connect');
    const notGrpc = await run({ grpc: { port: http.port } });
    expect(notGrpc.result).toBe("failure");
    expect(notGrpc.output).toStartWith('failed to connect service "127.0.0.1:');
    const silent = createServer(() => {});
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    const port = (silent.address() as { port: number }).port;
    const hung = await run({ grpc: { port } });
    silent.close();
    expect(hung).toEqual({
      result: "failure",
      output: `timeout: health rpc to 127.0.0.1:${port} did not complete within 1s`,
    });
  });

  test("exec reports a CRI error as a failure naming the command", async () => {
    const o = await run({ exec: { command: ["cat", "/tmp/health"] } });
    expect(o).toEqual({
      result: "failure",
      output: 'command "cat /tmp/health" could not run: no exec here',
    });
  });
});
