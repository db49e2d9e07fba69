// Servers on loopback for probe tests: an HTTP(S) server with a few behaviours a probe meets
// (healthy, failing, hanging, redirecting, huge body, reset), and a gRPC server implementing
// grpc.health.v1.Health/Check. HTTPS uses a self-signed certificate made with openssl.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Server, ServerCredentials, type ServerUnaryCall, type sendUnaryData } from "@grpc/grpc-js";
import {
  decodeHealthCheckRequest,
  encodeHealthCheckResponse,
  HEALTH_CHECK_PATH,
} from "../../src/agent/prober/grpc.ts";

export interface HTTPProbeServer {
  port: number;
  /** Headers of every request, by path. */
  seen: { path: string; headers: Record<string, string> }[];
  stop(): void;
}

/** A self-signed certificate for "localhost" and 127.0.0.1, made with openssl. */
export function selfSignedCert(): { cert: string; key: string } {
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-cert-"));
  try {
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=localhost",
        "-addext",
        "subjectAltName=DNS:localhost,IP:127.0.0.1",
        "-keyout",
        join(dir, "key.pem"),
        "-out",
        join(dir, "cert.pem"),
      ],
      { stdio: "ignore" },
    );
    return {
      cert: readFileSync(join(dir, "cert.pem"), "utf8"),
      key: readFileSync(join(dir, "key.pem"), "utf8"),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Paths: /healthz 200, /fail 500, /hang never answers, /same 302 to /healthz, /away 302 to
 * another host, /loop redirects to itself, /big 200 with 1 MiB;
 * /header/<name>/<value> answers 200 only when that request header has that value. */
export function startHTTPProbeServer(tls?: { cert: string; key: string }): HTTPProbeServer {
  const seen: HTTPProbeServer["seen"] = [];
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    ...(tls ? { tls } : {}),
    fetch(req) {
      const url = new URL(req.url);
      seen.push({ path: url.pathname, headers: Object.fromEntries(req.headers) });
      if (url.pathname === "/healthz") return new Response("ok");
      if (url.pathname === "/fail") return new Response("broken", { status: 500 });
      if (url.pathname === "/hang") return new Promise<Response>(() => {});
      if (url.pathname === "/same") return Response.redirect("/healthz", 302);
      if (url.pathname === "/away") return Response.redirect("http://127.0.0.9:1/x", 302);
      if (url.pathname === "/loop") return Response.redirect("/loop", 302);
      if (url.pathname === "/big") return new Response("x".repeat(1024 * 1024));
      const m = /^\/header\/([^/]+)\/([^/]+)$/.exec(url.pathname);
      if (m) {
        const ok = req.headers.get(m[1] as string) === decodeURIComponent(m[2] as string);
        return new Response(ok ? "ok" : "missing header", { status: ok ? 200 : 400 });
      }
      return new Response("not found", { status: 404 });
    },
  });
  return { port: server.port as number, seen, stop: () => server.stop(true) };
}

export interface GRPCHealthServer {
  port: number;
  /** Serving status per service name ("" is the server as a whole): 1 SERVING, 2 NOT_SERVING. */
  statuses: Map<string, number>;
  stop(): Promise<void>;
}

export async function startGRPCHealthServer(): Promise<GRPCHealthServer> {
  const statuses = new Map<string, number>([["", 1]]);
  const server = new Server();
  server.addService(
    {
      Check: {
        path: HEALTH_CHECK_PATH,
        requestStream: false,
        responseStream: false,
        requestSerialize: (r: { service: string }) => Buffer.from(r.service),
        // An object, not the bare string: the server treats a falsy message as missing.
        requestDeserialize: (b: Buffer) => ({ service: decodeHealthCheckRequest(b) }),
        responseSerialize: (code: number) => encodeHealthCheckResponse(code),
        responseDeserialize: (b: Buffer) => b[1] ?? 0,
      },
    },
    {
      Check: (call: ServerUnaryCall<{ service: string }, number>, cb: sendUnaryData<number>) => {
        const code = statuses.get(call.request.service);
        if (code === undefined) cb({ code: 5, details: `unknown service ${call.request.service}` });
        else cb(null, code);
      },
    },
  );
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(err) : resolve(p),
    ),
  );
  return {
    port,
    statuses,
    stop: () => new Promise<void>((resolve) => server.tryShutdown(() => resolve())),
  };
}
