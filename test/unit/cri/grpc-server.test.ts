// Our gRPC server on a unix socket, called by our own client (transport.ts) and by grpc-js, an
// independent implementation: unary and server-streaming methods, statuses, deadlines,
// cancellation, large messages both ways, an unknown method, metadata, the socket file.
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import http2 from "node:http2";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client, credentials, Metadata, type ServiceError } from "@grpc/grpc-js";
import { GrpcStatus } from "../../../src/cri/errors.ts";
import {
  GrpcError,
  type GrpcServerOptions,
  startGrpcServer,
} from "../../../src/cri/grpc-server.ts";
import { TransportError } from "../../../src/cri/grpc-wire.ts";
import { createH2Transport } from "../../../src/cri/transport.ts";

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c();
});

function socketPath(): string {
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-grpc-server-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return join(dir, "s.sock");
}

async function server(methods: Omit<GrpcServerOptions, "socketPath">, path = socketPath()) {
  const s = await startGrpcServer({ socketPath: path, ...methods });
  cleanups.push(() => s.close());
  return s;
}

function client(path: string) {
  const t = createH2Transport({
    address: { unix: path },
    maxReceiveBytes: 8 << 20,
    windowBytes: 1 << 20,
    maxHeaderListBytes: 1 << 20,
  });
  cleanups.push(() => t.close());
  return t;
}

async function failure(p: Promise<unknown>): Promise<TransportError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(TransportError);
  return err as TransportError;
}

/** A server stream's messages and end, through our client. */
function streamOf(path: string, method: string, request: Buffer, signal?: AbortSignal) {
  const messages: string[] = [];
  const ended = new Promise<TransportError | undefined>((resolve) =>
    client(path).serverStream(
      method,
      request,
      { onMessage: (m) => messages.push(m.toString()), onEnd: resolve },
      signal,
    ),
  );
  return { messages, ended };
}

describe("gRPC server, with our client", () => {
  test("answers a unary call, and a server stream message by message", async () => {
    const s = await server({
      unary: { "/t.S/Echo": (req) => Buffer.concat([Buffer.from("echo:"), req]) },
      serverStreams: {
        "/t.S/Count": async (req, send) => {
          for (let i = 1; i <= Number(req.toString()); i++) {
            send(Buffer.from(String(i)));
            await Bun.sleep(5);
          }
        },
      },
    });
    expect((await client(s.socketPath).call("/t.S/Echo", Buffer.from("hi"), 5000)).toString()).toBe(
      "echo:hi",
    );
    const { messages, ended } = streamOf(s.socketPath, "/t.S/Count", Buffer.from("3"));
    expect(await ended).toBeUndefined();
    expect(messages).toEqual(["1", "2", "3"]);
  });

  test("a GrpcError becomes the call's status and message; other errors are UNKNOWN", async () => {
    const errors: unknown[] = [];
    const s = await server({
      unary: {
        "/t.S/Refuse": () => {
          throw new GrpcError(GrpcStatus.FAILED_PRECONDITION, "no device 50% ready: café");
        },
        "/t.S/Break": () => Promise.reject(new Error("boom")),
      },
      onError: (_path, e) => errors.push(e),
    });
    const c = client(s.socketPath);
    const refused = await failure(c.call("/t.S/Refuse", Buffer.alloc(0), 5000));
    expect(refused.code).toBe(GrpcStatus.FAILED_PRECONDITION);
    expect(refused.details).toBe("no device 50% ready: café");
    const broken = await failure(c.call("/t.S/Break", Buffer.alloc(0), 5000));
    expect(broken.code).toBe(GrpcStatus.UNKNOWN);
    expect(broken.details).toContain("boom");
    expect(errors).toHaveLength(1);
  });

  test("an unknown method is UNIMPLEMENTED, naming it", async () => {
    const s = await server({});
    const err = await failure(client(s.socketPath).call("/t.S/Nope", Buffer.alloc(0), 5000));
    expect(err.code).toBe(GrpcStatus.UNIMPLEMENTED);
    expect(err.details).toContain("/t.S/Nope");
  });

  test("the handler's signal aborts at the client's deadline and when the client cancels", async () => {
    const aborted: string[] = [];
    const wait = (name: string) => (_req: Buffer, ctx: { signal: AbortSignal }) =>
      new Promise<Uint8Array>((_resolve, reject) =>
        ctx.signal.addEventListener("abort", () => {
          aborted.push(name);
          reject(ctx.signal.reason);
        }),
      );
    const s = await server({ unary: { "/t.S/Slow": wait("slow") } });
    const c = client(s.socketPath);
    const late = await failure(c.call("/t.S/Slow", Buffer.alloc(0), 100));
    expect(late.code).toBe(GrpcStatus.DEADLINE_EXCEEDED);
    const ac = new AbortController();
    const call = c.call("/t.S/Slow", Buffer.alloc(0), 5000, ac.signal);
    await Bun.sleep(30);
    ac.abort();
    expect((await failure(call)).code).toBe(GrpcStatus.CANCELLED);
    for (let i = 0; i < 100 && aborted.length < 2; i++) await Bun.sleep(10);
    expect(aborted).toEqual(["slow", "slow"]);
  });

  test("takes a request larger than its window and sends a 3 MB answer within the client's", async () => {
    const s = await server({
      unary: { "/t.S/Big": (req) => Buffer.alloc(3_000_000, req.length % 251) },
    });
    const answer = await client(s.socketPath).call("/t.S/Big", Buffer.alloc(1_500_000, 1), 10_000);
    expect(answer.length).toBe(3_000_000);
    expect(answer[2_999_999]).toBe(1_500_000 % 251);
  });

  test("close() ends a stream in flight and refuses later connections", async () => {
    const s = await server({
      serverStreams: {
        "/t.S/Forever": (_req, send, ctx) =>
          new Promise<void>((resolve) => {
            send(Buffer.from("first"));
            ctx.signal.addEventListener("abort", () => resolve());
          }),
      },
    });
    const { messages, ended } = streamOf(s.socketPath, "/t.S/Forever", Buffer.alloc(0));
    for (let i = 0; i < 100 && messages.length === 0; i++) await Bun.sleep(10);
    s.close();
    const end = await ended;
    expect(end).toBeDefined();
    expect([GrpcStatus.CANCELLED, GrpcStatus.UNAVAILABLE]).toContain(end?.code as never);
    const after = await failure(client(s.socketPath).call("/t.S/Forever", Buffer.alloc(0), 2000));
    expect(after.code).toBe(GrpcStatus.UNAVAILABLE);
  });

  test("replaces a stale socket, and refuses to remove a file that is not one", async () => {
    const path = socketPath();
    const first = await startGrpcServer({ socketPath: path });
    first.close();
    const second = await server({ unary: { "/t.S/Up": () => Buffer.from("up") } }, path);
    expect(
      (await client(second.socketPath).call("/t.S/Up", Buffer.alloc(0), 5000)).toString(),
    ).toBe("up");
    const file = socketPath();
    writeFileSync(file, "keep me");
    await expect(startGrpcServer({ socketPath: file })).rejects.toThrow("not a socket");
  });
});

describe("gRPC server, HTTP/2 requests that are not gRPC", () => {
  test("a GET is 405, a POST that is not application/grpc 415, and a connection without the HTTP/2 preface is closed", async () => {
    const s = await server({ unary: { "/t.S/Echo": (req) => req } });
    const session = http2.connect("http://localhost", {
      createConnection: () => connect(s.socketPath),
    });
    cleanups.push(() => session.destroy());
    const statusOf = (headers: http2.OutgoingHttpHeaders) =>
      new Promise<number>((resolve, reject) => {
        const req = session.request(headers);
        req.on("response", (h) => resolve(Number(h[":status"])));
        req.on("error", reject);
        req.end();
      });
    expect(await statusOf({ ":method": "GET", ":path": "/t.S/Echo" })).toBe(405);
    expect(
      await statusOf({ ":method": "POST", ":path": "/t.S/Echo", "content-type": "text/plain" }),
    ).toBe(415);
    const raw = connect(s.socketPath);
    raw.resume(); // read what comes, so that the end of the connection is seen
    const closed = new Promise<void>((resolve) => raw.on("close", () => resolve()));
    raw.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    await closed;
  });
});

describe("gRPC server, with grpc-js as the client", () => {
  function grpcJs(path: string) {
    const c = new Client(`unix:${path}`, credentials.createInsecure());
    cleanups.push(() => c.close());
    return c;
  }
  const asIs = (b: Buffer) => b;

  test("unary calls, metadata and error statuses", async () => {
    let seen: ReadonlyMap<string, string> | undefined;
    const s = await server({
      unary: {
        "/t.S/Echo": (req, ctx) => {
          seen = ctx.metadata;
          return req;
        },
        "/t.S/Refuse": () => {
          throw new GrpcError(GrpcStatus.NOT_FOUND, "no such device");
        },
      },
    });
    const c = grpcJs(s.socketPath);
    const md = new Metadata();
    md.set("x-plugin", "gpu");
    const unary = (path: string) =>
      new Promise<Buffer>((resolve, reject) =>
        c.makeUnaryRequest(path, asIs, asIs, Buffer.from("abc"), md, (err, v) =>
          err ? reject(err) : resolve(v as Buffer),
        ),
      );
    expect((await unary("/t.S/Echo")).toString()).toBe("abc");
    expect(seen?.get("x-plugin")).toBe("gpu");
    const err = (await unary("/t.S/Refuse").catch((e) => e)) as ServiceError;
    expect(err.code).toBe(GrpcStatus.NOT_FOUND);
    expect(err.details).toBe("no such device");
  });

  test("a server stream", async () => {
    const s = await server({
      serverStreams: {
        "/t.S/List": (_req, send) => {
          for (const d of ["a", "b", "c"]) send(Buffer.from(d));
        },
      },
    });
    const call = grpcJs(s.socketPath).makeServerStreamRequest(
      "/t.S/List",
      asIs,
      asIs,
      Buffer.alloc(0),
    );
    const got: string[] = [];
    await new Promise<void>((resolve, reject) => {
      call.on("data", (m: Buffer) => got.push(m.toString()));
      call.on("error", reject);
      call.on("end", () => resolve());
    });
    expect(got).toEqual(["a", "b", "c"]);
  });
});
