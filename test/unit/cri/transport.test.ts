// The gRPC transport (our own HTTP/2 client) against a plain node:http2 server on a unix socket,
// so that each test decides exactly what the "runtime" sends: statuses in trailers or headers,
// broken frames, oversized bodies, resets, a connection that dies, a server that comes back, a
// stream of messages. (grpc-js on Bun failed five of these: docs/grpc-stack.md.)
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import http2 from "node:http2";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GrpcStatus } from "../../../src/cri/errors.ts";
import {
  decodeGrpcMessage,
  grpcTimeout,
  MessageReader,
  statusOfHttp,
  statusOfReset,
  TransportError,
} from "../../../src/cri/grpc-wire.ts";
import { createH2Transport } from "../../../src/cri/transport.ts";

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
  const t = createH2Transport({
    address: { unix: path },
    maxReceiveBytes,
    windowBytes: 1 << 20,
    maxHeaderListBytes: 1 << 20,
  });
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

describe("gRPC transport, unary calls", () => {
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
      errs.push(await failure(t.call("/x/Y", Buffer.alloc(0), 1000)));
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

describe("gRPC transport, server streams", () => {
  /** Opens a stream on a new transport; resolves with its messages and its end. */
  function stream(path: string, signal?: AbortSignal, maxReceiveBytes?: number) {
    const messages: string[] = [];
    const ended = new Promise<TransportError | undefined>((resolve) => {
      transport(path, maxReceiveBytes).serverStream(
        "/x/Watch",
        Buffer.from("w"),
        { onMessage: (m) => messages.push(m.toString()), onEnd: resolve },
        signal,
      );
    });
    return { messages, ended };
  }

  test("hands over each message as it arrives, split or joined across frames, then ends OK", async () => {
    const path = socketPath();
    let headers: http2.IncomingHttpHeaders | undefined;
    const server = http2.createServer();
    server.on("stream", (stream, h) => {
      const s = stream as http2.ServerHttp2Stream;
      headers = h;
      s.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
      s.on("wantTrailers", () => s.sendTrailers({ "grpc-status": "0" }));
      const two = Buffer.concat([frame(Buffer.from("b")), frame(Buffer.from("c"))]);
      const big = frame(Buffer.alloc(70_000, 100));
      s.write(frame(Buffer.from("a")));
      setTimeout(() => s.write(two.subarray(0, 3)), 20);
      setTimeout(() => s.write(two.subarray(3)), 40);
      setTimeout(() => s.end(big), 60);
    });
    await new Promise<void>((resolve) => server.listen(path, resolve));
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const { messages, ended } = stream(path);
    expect(await ended).toBeUndefined();
    expect(messages.slice(0, 3)).toEqual(["a", "b", "c"]);
    expect(messages[3]).toBe("d".repeat(70_000));
    expect(headers?.["grpc-timeout"]).toBeUndefined();
  });

  test("an error status after some messages ends the stream with that error", async () => {
    const path = socketPath();
    await serve(path, (s) => {
      s.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
      s.on("wantTrailers", () => s.sendTrailers({ "grpc-status": "14", "grpc-message": "gone" }));
      s.end(frame(Buffer.from("x")));
    });
    const { messages, ended } = stream(path);
    const err = await ended;
    expect(err?.code).toBe(GrpcStatus.UNAVAILABLE);
    expect(err?.details).toBe("gone");
    expect(messages).toEqual(["x"]);
  });

  test("the runtime crashing ends an open stream with UNAVAILABLE", async () => {
    const path = socketPath();
    const server = http2.createServer();
    const sockets: { destroy(): void }[] = [];
    server.on("connection", (socket) => sockets.push(socket));
    server.on("stream", (stream) => {
      const s = stream as http2.ServerHttp2Stream;
      s.on("error", () => {});
      s.respond({ ":status": 200, "content-type": "application/grpc" });
      s.write(frame(Buffer.from("x")));
      // its socket closes with no HTTP/2 goodbye
      setTimeout(() => {
        for (const socket of sockets) socket.destroy();
      }, 30);
    });
    await new Promise<void>((resolve) => server.listen(path, resolve));
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const { messages, ended } = stream(path);
    expect((await ended)?.code).toBe(GrpcStatus.UNAVAILABLE);
    expect(messages).toEqual(["x"]);
  });

  test("aborting the signal ends the stream with CANCELLED and resets it", async () => {
    const path = socketPath();
    let closed: Promise<void> | undefined;
    await serve(path, (s) => {
      closed = new Promise((resolve) => s.on("close", () => resolve()));
      s.respond({ ":status": 200, "content-type": "application/grpc" });
      s.write(frame(Buffer.from("x")));
    });
    const ac = new AbortController();
    const { messages, ended } = stream(path, ac.signal);
    while (messages.length === 0) await Bun.sleep(5);
    ac.abort();
    expect((await ended)?.code).toBe(GrpcStatus.CANCELLED);
    await closed;
  });

  test("a message over the size limit ends the stream with RESOURCE_EXHAUSTED", async () => {
    const path = socketPath();
    await serve(path, (s) => {
      s.respond({ ":status": 200, "content-type": "application/grpc" });
      s.write(frame(Buffer.alloc(10_000)));
    });
    const { ended } = stream(path, undefined, 4096);
    expect((await ended)?.code).toBe(GrpcStatus.RESOURCE_EXHAUSTED);
  });

  test("nothing listening ends the stream with UNAVAILABLE", async () => {
    const { ended } = stream(socketPath());
    expect((await ended)?.code).toBe(GrpcStatus.UNAVAILABLE);
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

  test("MessageReader splits a body into messages across chunks and says how it ended", () => {
    const r = new MessageReader(100);
    const body = Buffer.concat([
      frame(Buffer.from("ab")),
      frame(Buffer.alloc(0)),
      frame(Buffer.from("c")),
    ]);
    expect(r.push(body.subarray(0, 3))).toEqual([]);
    expect(r.push(body.subarray(3, 14))).toEqual([Buffer.from("ab"), Buffer.alloc(0)]);
    expect(r.finish()).toBe("a truncated message header");
    expect(r.push(body.subarray(14, 17))).toEqual([]);
    expect(r.finish()).toBe("shorter than its header says");
    expect(r.push(body.subarray(17))).toEqual([Buffer.from("c")]);
    expect(r.finish()).toBeUndefined();
    // an empty message alone in a chunk, as an empty response comes
    expect(r.push(frame(Buffer.alloc(0)))).toEqual([Buffer.alloc(0)]);
  });

  test("MessageReader refuses a compressed message and one over its limit", () => {
    const compressed = new MessageReader(100).push(frame(Buffer.from("x"), 1));
    expect((compressed as TransportError).code).toBe(GrpcStatus.INTERNAL);
    const big = new MessageReader(4).push(frame(Buffer.from("12345")));
    expect((big as TransportError).code).toBe(GrpcStatus.RESOURCE_EXHAUSTED);
  });
});
