// The unary gRPC transport against a plain node:http2 server on a unix socket, so that each test
// decides exactly what the "runtime" sends: statuses in trailers or headers, broken frames,
// oversized bodies, resets, a connection that dies, a server that comes back.
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import http2 from "node:http2";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GrpcStatus } from "../../../src/cri/errors.ts";
import {
  createUnaryTransport,
  decodeGrpcMessage,
  grpcTimeout,
  statusOfHttp,
  statusOfReset,
  TransportError,
  unframe,
} from "../../../src/cri/transport.ts";

type Handler = (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => void;

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function socketPath(): string {
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-transport-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return join(dir, "rt.sock");
}

async function serve(path: string, handler: Handler): Promise<() => Promise<void>> {
  const server = http2.createServer();
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (s) => {
    sessions.add(s);
    s.on("close", () => sessions.delete(s));
  });
  server.on("stream", (stream, headers) => {
    stream.on("error", () => {}); // resets and cancels, which some tests make on purpose
    const body: Buffer[] = [];
    stream.on("data", (d: Buffer) => body.push(d));
    stream.on("end", () => handler(stream as http2.ServerHttp2Stream, headers));
  });
  await new Promise<void>((resolve) => server.listen(path, resolve));
  const stop = async () => {
    for (const s of sessions) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  cleanups.push(stop);
  return stop;
}

function frame(message: Buffer, flag = 0): Buffer {
  const head = Buffer.alloc(5);
  head[0] = flag;
  head.writeUInt32BE(message.length, 1);
  return Buffer.concat([head, message]);
}

/** Answers OK with `message`, in headers + data + trailers, as a gRPC server does. */
function ok(message: Buffer): Handler {
  return (stream) => {
    stream.respond(
      { ":status": 200, "content-type": "application/grpc" },
      { waitForTrailers: true },
    );
    stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
    stream.end(frame(message));
  };
}

function transport(path: string, maxReceiveBytes = 1 << 20) {
  const t = createUnaryTransport({ socketPath: path, maxReceiveBytes, windowBytes: 1 << 20 });
  cleanups.push(() => t.close());
  return t;
}

async function failure(p: Promise<unknown>): Promise<TransportError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(TransportError);
    return err as TransportError;
  }
  throw new Error("the call succeeded");
}

/** One call on a new transport to the server at `path`, which must fail. */
function callFails(
  path: string,
  opts: { maxReceiveBytes?: number; timeoutMs?: number } = {},
): Promise<TransportError> {
  const t = transport(path, opts.maxReceiveBytes);
  return failure(t.call("/x/Y", Buffer.alloc(0), opts.timeoutMs ?? 5000));
}

describe("unary transport", () => {
  test("sends one framed message with the gRPC headers and returns the answer", async () => {
    const path = socketPath();
    let seen: { headers: http2.IncomingHttpHeaders; body: Buffer } | undefined;
    const server = http2.createServer();
    server.on("stream", (stream, headers) => {
      const chunks: Buffer[] = [];
      stream.on("data", (d: Buffer) => chunks.push(d));
      stream.on("end", () => {
        seen = { headers, body: Buffer.concat(chunks) };
        ok(Buffer.from("pong"))(stream as http2.ServerHttp2Stream, headers);
      });
    });
    await new Promise<void>((resolve) => server.listen(path, resolve));
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const t = transport(path);
    const answer = await t.call("/pkg.Svc/Ping", Buffer.from("ping"), 5000);
    expect(answer.toString()).toBe("pong");
    expect(seen?.headers[":path"]).toBe("/pkg.Svc/Ping");
    expect(seen?.headers[":method"]).toBe("POST");
    expect(seen?.headers["content-type"]).toBe("application/grpc");
    expect(seen?.headers.te).toBe("trailers");
    expect(seen?.headers["grpc-timeout"]).toBe("5000m");
    expect(seen?.body).toEqual(frame(Buffer.from("ping")));
    // the session is kept: a second call works on it
    expect((await t.call("/pkg.Svc/Ping", Buffer.alloc(0), 5000)).toString()).toBe("pong");
  });

  test("returns a response larger than the default HTTP/2 window whole", async () => {
    const path = socketPath();
    const big = Buffer.alloc(300_000, 7);
    await serve(path, ok(big));
    const answer = await transport(path).call("/x/Y", Buffer.alloc(0), 5000);
    expect(answer.equals(big)).toBe(true);
  });

  test("sends a request larger than the runtime's HTTP/2 window and takes a response larger than ours", async () => {
    const path = socketPath();
    const request = Buffer.alloc(200_000, 3);
    const response = Buffer.alloc(3_000_000, 9);
    let got = 0;
    const server = http2.createServer();
    server.on("stream", (stream, headers) => {
      stream.on("data", (d: Buffer) => {
        got += d.length;
      });
      stream.on("end", () => ok(response)(stream as http2.ServerHttp2Stream, headers));
    });
    await new Promise<void>((resolve) => server.listen(path, resolve));
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const answer = await transport(path, 4_000_000).call("/x/Y", request, 10_000);
    expect(got).toBe(request.length + 5);
    expect(answer.equals(response)).toBe(true);
  });

  test("after the runtime sends GOAWAY, the next call opens a new connection", async () => {
    const path = socketPath();
    const sessions: http2.ServerHttp2Session[] = [];
    await serve(path, (stream, headers) => {
      ok(Buffer.from("x"))(stream, headers);
      const session = stream.session as http2.ServerHttp2Session;
      if (!sessions.includes(session)) sessions.push(session);
      stream.on("close", () => session.goaway());
    });
    const t = transport(path);
    expect((await t.call("/x/Y", Buffer.alloc(0), 5000)).toString()).toBe("x");
    await Bun.sleep(50);
    expect((await t.call("/x/Y", Buffer.alloc(0), 5000)).toString()).toBe("x");
    expect(sessions).toHaveLength(2);
  });

  test("an error status in the trailers rejects with its code and decoded message", async () => {
    const path = socketPath();
    await serve(path, (stream) => {
      stream.respond(
        { ":status": 200, "content-type": "application/grpc" },
        { waitForTrailers: true },
      );
      stream.on("wantTrailers", () =>
        stream.sendTrailers({
          "grpc-status": "5",
          "grpc-message": "container %22abc%22 not found",
        }),
      );
      stream.end();
    });
    const err = await callFails(path);
    expect(err.code).toBe(GrpcStatus.NOT_FOUND);
    expect(err.details).toBe('container "abc" not found');
  });

  test("a trailers-only error (status in the headers) rejects with its code", async () => {
    const path = socketPath();
    await serve(path, (stream) => {
      stream.respond(
        {
          ":status": 200,
          "content-type": "application/grpc",
          "grpc-status": "12",
          "grpc-message": "unknown method",
        },
        { endStream: true },
      );
    });
    const err = await callFails(path);
    expect(err.code).toBe(GrpcStatus.UNIMPLEMENTED);
    expect(err.details).toBe("unknown method");
  });

  test("an HTTP error without a gRPC status maps as the gRPC HTTP mapping says", async () => {
    const path = socketPath();
    await serve(path, (stream) => {
      stream.respond({ ":status": 404 }, { endStream: true });
    });
    const err = await callFails(path);
    expect(err.code).toBe(GrpcStatus.UNIMPLEMENTED);
    expect(err.details).toContain("HTTP 404");
  });

  test("an OK status without a message, or with a broken one, is an INTERNAL error", async () => {
    const path = socketPath();
    const bodies = [
      Buffer.alloc(0),
      frame(Buffer.from("x"), 1),
      Buffer.concat([frame(Buffer.from("a")), frame(Buffer.from("b"))]),
    ];
    let i = 0;
    await serve(path, (stream) => {
      const body = bodies[i++] as Buffer;
      stream.respond(
        { ":status": 200, "content-type": "application/grpc" },
        { waitForTrailers: true },
      );
      stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      stream.end(body);
    });
    const t = transport(path);
    const errs = [];
    for (let n = 0; n < bodies.length; n++)
      errs.push(await failure(t.call("/x/Y", Buffer.alloc(0), 5000)));
    expect(errs.map((e) => e.code)).toEqual([
      GrpcStatus.INTERNAL,
      GrpcStatus.INTERNAL,
      GrpcStatus.INTERNAL,
    ]);
    expect(errs[0]?.details).toContain("no response message");
    expect(errs[1]?.details).toContain("compressed");
    expect(errs[2]?.details).toContain("more than one");
  });

  test("a response over the size limit is refused with RESOURCE_EXHAUSTED", async () => {
    const path = socketPath();
    await serve(path, ok(Buffer.alloc(10_000)));
    const err = await callFails(path, { maxReceiveBytes: 4096 });
    expect(err.code).toBe(GrpcStatus.RESOURCE_EXHAUSTED);
    expect(err.details).toContain("4096");
  });

  test("no answer within the deadline is DEADLINE_EXCEEDED, and the stream is cancelled", async () => {
    const path = socketPath();
    let cancelled: Promise<void> | undefined;
    await serve(path, (stream) => {
      cancelled = new Promise((resolve) => stream.on("close", () => resolve()));
    });
    const err = await callFails(path, { timeoutMs: 100 });
    expect(err.code).toBe(GrpcStatus.DEADLINE_EXCEEDED);
    await cancelled;
  });

  test("an aborted signal cancels the call with CANCELLED", async () => {
    const path = socketPath();
    await serve(path, () => {});
    const ac = new AbortController();
    const call = transport(path).call("/x/Y", Buffer.alloc(0), 5000, ac.signal);
    setTimeout(() => ac.abort(), 20);
    expect((await failure(call)).code).toBe(GrpcStatus.CANCELLED);
  });

  test("a stream the server resets without answering fails with UNAVAILABLE", async () => {
    const path = socketPath();
    await serve(path, (stream) => stream.close(http2.constants.NGHTTP2_REFUSED_STREAM));
    const err = await callFails(path);
    expect(err.code).toBe(GrpcStatus.UNAVAILABLE);
    expect(err.details).toContain("closed the stream");
  });

  test("an answer with headers but no status is UNKNOWN", async () => {
    const path = socketPath();
    await serve(path, (stream) => {
      stream.respond({ ":status": 200, "content-type": "application/grpc" });
      stream.end(frame(Buffer.from("x")));
    });
    const err = await callFails(path);
    expect(err.code).toBe(GrpcStatus.UNKNOWN);
  });

  test("nothing listening is UNAVAILABLE at once; the same transport works once a server is up", async () => {
    const path = socketPath();
    const t = transport(path);
    const err = await failure(t.call("/x/Y", Buffer.alloc(0), 5000));
    expect(err.code).toBe(GrpcStatus.UNAVAILABLE);
    expect(err.details).toBe(`connect ENOENT ${path}`);
    await serve(path, ok(Buffer.from("up")));
    expect((await t.call("/x/Y", Buffer.alloc(0), 5000)).toString()).toBe("up");
  });

  test("a connection that dies mid-call fails the call with UNAVAILABLE; the next call reconnects", async () => {
    const path = socketPath();
    let calls = 0;
    const stop = await serve(path, (stream) => {
      calls++;
      if (calls === 1) stream.session?.destroy();
      else ok(Buffer.from("again"))(stream, {});
    });
    const t = transport(path);
    const err = await failure(t.call("/x/Y", Buffer.alloc(0), 5000));
    expect(err.code).toBe(GrpcStatus.UNAVAILABLE);
    expect((await t.call("/x/Y", Buffer.alloc(0), 5000)).toString()).toBe("again");
    await stop();
    expect((await failure(t.call("/x/Y", Buffer.alloc(0), 5000))).code).toBe(
      GrpcStatus.UNAVAILABLE,
    );
    await serve(path, ok(Buffer.from("back")));
    expect((await t.call("/x/Y", Buffer.alloc(0), 5000)).toString()).toBe("back");
  });

  test("close() fails the calls in flight with CANCELLED and every later call", async () => {
    const path = socketPath();
    await serve(path, () => {});
    const t = transport(path);
    const call = t.call("/x/Y", Buffer.alloc(0), 5000);
    await Bun.sleep(20);
    t.close();
    expect((await failure(call)).code).toBe(GrpcStatus.CANCELLED);
    expect((await failure(t.call("/x/Y", Buffer.alloc(0), 5000))).code).toBe(GrpcStatus.CANCELLED);
  });
});

describe("transport helpers", () => {
  test("grpcTimeout() writes at most 8 digits, in larger units when needed", () => {
    expect(grpcTimeout(10_000)).toBe("10000m");
    expect(grpcTimeout(99_999_999)).toBe("99999999m");
    expect(grpcTimeout(600_000_000)).toBe("600000S");
    expect(grpcTimeout(0.2)).toBe("1m");
  });

  test("decodeGrpcMessage() percent-decodes, and keeps what does not decode", () => {
    expect(decodeGrpcMessage("a%20b%25")).toBe("a b%");
    expect(decodeGrpcMessage("100%")).toBe("100%");
    expect(decodeGrpcMessage(undefined)).toBe("");
  });

  test("statusOfHttp() follows the gRPC HTTP/2 mapping", () => {
    expect([400, 401, 403, 404, 429, 502, 503, 504, 500].map(statusOfHttp)).toEqual([
      GrpcStatus.INTERNAL,
      GrpcStatus.UNAUTHENTICATED,
      GrpcStatus.PERMISSION_DENIED,
      GrpcStatus.UNIMPLEMENTED,
      GrpcStatus.UNAVAILABLE,
      GrpcStatus.UNAVAILABLE,
      GrpcStatus.UNAVAILABLE,
      GrpcStatus.UNAVAILABLE,
      GrpcStatus.UNKNOWN,
    ]);
  });

  test("statusOfReset() follows grpc's reading of HTTP/2 reset codes", () => {
    const {
      NGHTTP2_REFUSED_STREAM,
      NGHTTP2_CANCEL,
      NGHTTP2_ENHANCE_YOUR_CALM,
      NGHTTP2_INTERNAL_ERROR,
    } = http2.constants;
    expect(
      [
        NGHTTP2_REFUSED_STREAM,
        NGHTTP2_CANCEL,
        NGHTTP2_ENHANCE_YOUR_CALM,
        NGHTTP2_INTERNAL_ERROR,
      ].map(statusOfReset),
    ).toEqual([
      GrpcStatus.UNAVAILABLE,
      GrpcStatus.CANCELLED,
      GrpcStatus.RESOURCE_EXHAUSTED,
      GrpcStatus.INTERNAL,
    ]);
  });

  test("unframe() takes exactly one uncompressed message", () => {
    expect(unframe(frame(Buffer.from("abc")))).toEqual(Buffer.from("abc"));
    expect(unframe(frame(Buffer.alloc(0)))).toEqual(Buffer.alloc(0));
    expect(unframe(frame(Buffer.from("abc")).subarray(0, 6))).toBeInstanceOf(TransportError);
    expect(unframe(Buffer.from([0, 0]))).toBeInstanceOf(TransportError);
  });
});
