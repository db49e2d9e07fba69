// The gRPC transport (our own HTTP/2 client) against a raw HTTP/2 peer on a unix socket
// (test/lib/h2-peer.ts), so that each test decides exactly which frames the "runtime" sends:
// statuses in trailers or in a trailers-only HEADERS, broken messages, oversized bodies,
// RST_STREAM REFUSED_STREAM, GOAWAY with its last stream, a socket that closes, a server that
// comes back, a stream of messages, and flow control both ways (the peer gives our client its
// 65,535-byte default window and keeps within ours); and sees every frame our client sends (its
// request, its RST_STREAM CANCEL). An HTTP/2 library's server would choose its own frames: Bun's
// node:http2 answers a refused stream with DATA and END_STREAM, never RST_STREAM. (grpc-js on Bun
// failed five of these: docs/grpc-stack.md.)
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GrpcStatus } from "../../../src/cri/errors.ts";
import {
  decodeGrpcMessage,
  grpcTimeout,
  MessageReader,
  statusOfHttp,
  statusOfReset,
  type TransportError,
} from "../../../src/cri/grpc-wire.ts";
import { HpackDecoder } from "../../../src/cri/hpack.ts";
import { createH2Transport } from "../../../src/cri/transport.ts";
import {
  callFailure,
  F,
  type RawConn,
  type RawServer,
  rawServer,
  readBody,
  sendData,
  T,
  u32,
} from "../../lib/h2-peer.ts";
import { eventually } from "../../lib/testbed.ts";

/** A request the peer read whole: its stream, header fields and body (END_STREAM seen). */
interface Request {
  id: number;
  headers: Map<string, string>;
  body: Buffer;
}
type Handler = (c: RawConn, req: Request) => void | Promise<void>;

const cleanups: (() => Promise<void> | void)[] = [];
/** What a handler threw while its connection was open (a test bug, or a broken rule). */
const handlerErrors: unknown[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  expect(handlerErrors.splice(0)).toEqual([]);
});

function socketPath(): string {
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-transport-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return join(dir, "rt.sock");
}

/** A raw server at `path`: each connection gets empty SETTINGS (the default windows), then each
 * request, once the client ended it (the peer giving back its window as it reads), goes to
 * `handler`. */
function serve(path: string, handler: Handler): RawServer {
  const server = rawServer({ unix: path }, async (c) => {
    c.settings();
    const decoder = new HpackDecoder();
    let last = 0;
    for (;;) {
      const h = await c
        .frame((f) => f.type === T.HEADERS && f.id > last, 60_000)
        .catch(() => undefined);
      if (h === undefined) return;
      last = h.id;
      const headers = new Map(decoder.decode(h.payload));
      readBody(c, h.id)
        .then((body) => handler(c, { id: h.id, headers, body }))
        .catch((err: unknown) => {
          if (!c.closed) handlerErrors.push(err);
        });
    }
  });
  cleanups.push(() => server.stop());
  return server;
}

function frame(message: Buffer, flag = 0): Buffer {
  const head = Buffer.alloc(5);
  head[0] = flag;
  head.writeUInt32BE(message.length, 1);
  return Buffer.concat([head, message]);
}

const OK_HEADERS: [string, string][] = [
  [":status", "200"],
  ["content-type", "application/grpc"],
];

/** Trailers: one HEADERS with END_STREAM. */
function trailers(c: RawConn, id: number, fields: [string, string][]): void {
  c.headers(id, fields, F.END_HEADERS | F.END_STREAM);
}

/** Answers OK with `message`, in headers + data (within our client's windows) + trailers, as a
 * gRPC server does. */
function ok(message: Buffer): Handler {
  return async (c, req) => {
    c.headers(req.id, OK_HEADERS);
    await sendData(c, req.id, frame(message));
    trailers(c, req.id, [["grpc-status", "0"]]);
  };
}

/** The RST_STREAM our client sent on stream `id`: its error code. */
async function resetCode(c: RawConn, id: number): Promise<number> {
  const f = await c.frame((x) => x.type === T.RST_STREAM && x.id === id);
  return f.payload.readUInt32BE(0);
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

const failure = callFailure;

/** One call on a new transport to the server at `path`, which must fail. */
function callFails(
  path: string,
  opts: { maxReceiveBytes?: number; timeoutMs?: number } = {},
): Promise<TransportError> {
  const t = transport(path, opts.maxReceiveBytes);
  return failure(t.call("/x/Y", Buffer.alloc(0), opts.timeoutMs ?? 5000));
}

/** RST_STREAM CANCEL, the code our client resets a stream with when it gives up on it. */
const CANCEL = 0x8;

describe("gRPC transport, unary calls", () => {
  test("sends one framed message with the gRPC headers and returns the answer", async () => {
    const path = socketPath();
    const seen: Request[] = [];
    const server = serve(path, (c, req) => {
      seen.push(req);
      c.answer(req.id, Buffer.from("pong"));
    });
    const t = transport(path);
    const answer = await t.call("/pkg.Svc/Ping", Buffer.from("ping"), 5000);
    expect(answer.toString()).toBe("pong");
    const headers = seen[0]?.headers;
    expect(headers?.get(":path")).toBe("/pkg.Svc/Ping");
    expect(headers?.get(":method")).toBe("POST");
    expect(headers?.get(":scheme")).toBe("http");
    expect(headers?.get("content-type")).toBe("application/grpc");
    expect(headers?.get("te")).toBe("trailers");
    expect(headers?.get("grpc-timeout")).toBe("5000m");
    expect(seen[0]?.body).toEqual(frame(Buffer.from("ping")));
    // the session is kept: a second call works on it
    expect((await t.call("/pkg.Svc/Ping", Buffer.alloc(0), 5000)).toString()).toBe("pong");
    expect(server.connections).toHaveLength(1);
    expect(seen.map((r) => r.id)).toEqual([1, 3]);
  });

  test("returns a response larger than the default HTTP/2 window whole", async () => {
    const path = socketPath();
    const big = Buffer.alloc(300_000, 7);
    serve(path, ok(big));
    const answer = await transport(path).call("/x/Y", Buffer.alloc(0), 5000);
    expect(answer.equals(big)).toBe(true);
  });

  test("sends a request larger than the runtime's HTTP/2 window and takes a response larger than ours", async () => {
    const path = socketPath();
    const request = Buffer.alloc(200_000, 3);
    const response = Buffer.alloc(3_000_000, 9);
    let got = 0;
    // the peer's window stays 65,535 bytes, given back as it reads (readBody() checks that our
    // client never sends past it); it sends its 3 MB as our client's WINDOW_UPDATEs allow
    const server = serve(path, (c, req) => {
      got = req.body.length;
      return ok(response)(c, req);
    });
    const answer = await transport(path, 4_000_000).call("/x/Y", request, 10_000);
    expect(got).toBe(request.length + 5);
    expect(answer.equals(response)).toBe(true);
    const c = server.connections[0] as RawConn;
    const updates = c.frames.filter((f) => f.type === T.WINDOW_UPDATE && f.id !== 0);
    expect(updates.length).toBeGreaterThan(0); // the response needed our client's updates
  });

  test("after the runtime sends GOAWAY, the next call opens a new connection", async () => {
    const path = socketPath();
    const server = serve(path, (c, req) => {
      c.answer(req.id, Buffer.from("x"));
      c.send(T.GOAWAY, 0, 0, u32(req.id, 0)); // NO_ERROR; the last stream it processed
    });
    const t = transport(path);
    expect((await t.call("/x/Y", Buffer.alloc(0), 5000)).toString()).toBe("x");
    // the client closes a connection that said GOAWAY once its last stream ended
    await (server.connections[0] as RawConn).whenClosed;
    expect((await t.call("/x/Y", Buffer.alloc(0), 5000)).toString()).toBe("x");
    expect(server.connections).toHaveLength(2);
    expect((await (server.connections[1] as RawConn).request()).id).toBe(1);
  });

  test("an error status in the trailers rejects with its code and decoded message", async () => {
    const path = socketPath();
    serve(path, (c, req) => {
      c.headers(req.id, OK_HEADERS);
      trailers(c, req.id, [
        ["grpc-status", "5"],
        ["grpc-message", "container %22abc%22 not found"],
      ]);
    });
    const err = await callFails(path);
    expect(err.code).toBe(GrpcStatus.NOT_FOUND);
    expect(err.details).toBe('container "abc" not found');
  });

  test("a trailers-only error (status in the headers) rejects with its code", async () => {
    const path = socketPath();
    serve(path, (c, req) =>
      trailers(c, req.id, [
        ...OK_HEADERS,
        ["grpc-status", "12"],
        ["grpc-message", "unknown method"],
      ]),
    );
    const err = await callFails(path);
    expect(err.code).toBe(GrpcStatus.UNIMPLEMENTED);
    expect(err.details).toBe("unknown method");
  });

  test("an HTTP error without a gRPC status maps as the gRPC HTTP mapping says", async () => {
    const path = socketPath();
    serve(path, (c, req) => trailers(c, req.id, [[":status", "404"]]));
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
    serve(path, async (c, req) => {
      const body = bodies[i++] as Buffer;
      c.headers(req.id, OK_HEADERS);
      if (body.length > 0) await sendData(c, req.id, body);
      trailers(c, req.id, [["grpc-status", "0"]]);
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
    const server = serve(path, ok(Buffer.alloc(10_000)));
    const err = await callFails(path, { maxReceiveBytes: 4096 });
    expect(err.code).toBe(GrpcStatus.RESOURCE_EXHAUSTED);
    expect(err.details).toContain("4096");
    // refused at its DATA, before the trailers: the client resets the stream
    expect(await resetCode(server.connections[0] as RawConn, 1)).toBe(CANCEL);
  });

  test("no answer within the deadline is DEADLINE_EXCEEDED, and the stream is cancelled", async () => {
    const path = socketPath();
    const server = serve(path, () => {});
    const err = await callFails(path, { timeoutMs: 100 });
    expect(err.code).toBe(GrpcStatus.DEADLINE_EXCEEDED);
    const c = server.connections[0] as RawConn;
    const req = await c.request();
    expect(await resetCode(c, req.id)).toBe(CANCEL);
  });

  test("an aborted signal cancels the call with CANCELLED", async () => {
    const path = socketPath();
    const server = serve(path, () => {});
    const ac = new AbortController();
    const call = transport(path).call("/x/Y", Buffer.alloc(0), 5000, ac.signal);
    setTimeout(() => ac.abort(), 20);
    expect((await failure(call)).code).toBe(GrpcStatus.CANCELLED);
    expect(await resetCode(server.connections[0] as RawConn, 1)).toBe(CANCEL);
  });

  test("a stream the server resets without answering fails with UNAVAILABLE", async () => {
    const path = socketPath();
    serve(path, (c, req) => c.send(T.RST_STREAM, 0, req.id, u32(0x7))); // REFUSED_STREAM
    const err = await callFails(path);
    expect(err.code).toBe(GrpcStatus.UNAVAILABLE);
    expect(err.details).toContain("closed the stream");
    expect(err.details).toContain("HTTP/2 code 7");
  });

  test("an answer with headers but no status is UNKNOWN", async () => {
    const path = socketPath();
    serve(path, async (c, req) => {
      c.headers(req.id, OK_HEADERS);
      await sendData(c, req.id, frame(Buffer.from("x")), true);
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
    serve(path, ok(Buffer.from("up")));
    expect((await t.call("/x/Y", Buffer.alloc(0), 5000)).toString()).toBe("up");
  });

  test("a connection that dies mid-call fails the call with UNAVAILABLE; the next call reconnects", async () => {
    const path = socketPath();
    let calls = 0;
    const server = serve(path, (c, req) => {
      calls++;
      if (calls === 1)
        c.close(); // the socket closes, no GOAWAY
      else c.answer(req.id, Buffer.from("again"));
    });
    const t = transport(path);
    const err = await failure(t.call("/x/Y", Buffer.alloc(0), 5000));
    expect(err.code).toBe(GrpcStatus.UNAVAILABLE);
    expect((await t.call("/x/Y", Buffer.alloc(0), 5000)).toString()).toBe("again");
    expect(server.connections).toHaveLength(2);
    server.stop();
    expect((await failure(t.call("/x/Y", Buffer.alloc(0), 5000))).code).toBe(
      GrpcStatus.UNAVAILABLE,
    );
    serve(path, ok(Buffer.from("back")));
    expect((await t.call("/x/Y", Buffer.alloc(0), 5000)).toString()).toBe("back");
  });

  test("close() fails the calls in flight with CANCELLED and every later call", async () => {
    const path = socketPath();
    const server = serve(path, () => {});
    const t = transport(path);
    const call = t.call("/x/Y", Buffer.alloc(0), 5000);
    const c = await eventually("the raw peer's connection", () => server.connections[0], 5000, 5);
    await c.request();
    t.close();
    expect((await failure(call)).code).toBe(GrpcStatus.CANCELLED);
    expect((await failure(t.call("/x/Y", Buffer.alloc(0), 5000))).code).toBe(GrpcStatus.CANCELLED);
    await c.whenClosed;
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
    let headers: Map<string, string> | undefined;
    serve(path, async (c, req) => {
      headers = req.headers;
      c.headers(req.id, OK_HEADERS);
      const two = Buffer.concat([frame(Buffer.from("b")), frame(Buffer.from("c"))]);
      const big = frame(Buffer.alloc(70_000, 100)); // more than one frame and one default window
      await sendData(c, req.id, frame(Buffer.from("a")));
      await Bun.sleep(20);
      await sendData(c, req.id, two.subarray(0, 3));
      await Bun.sleep(20);
      await sendData(c, req.id, two.subarray(3));
      await Bun.sleep(20);
      await sendData(c, req.id, big);
      trailers(c, req.id, [["grpc-status", "0"]]);
    });
    const { messages, ended } = stream(path);
    expect(await ended).toBeUndefined();
    expect(messages.slice(0, 3)).toEqual(["a", "b", "c"]);
    expect(messages[3]).toBe("d".repeat(70_000));
    expect(messages).toHaveLength(4);
    expect(headers?.get(":path")).toBe("/x/Watch");
    expect(headers?.has("grpc-timeout")).toBe(false);
  });

  test("an error status after some messages ends the stream with that error", async () => {
    const path = socketPath();
    serve(path, async (c, req) => {
      c.headers(req.id, OK_HEADERS);
      await sendData(c, req.id, frame(Buffer.from("x")));
      trailers(c, req.id, [
        ["grpc-status", "14"],
        ["grpc-message", "gone"],
      ]);
    });
    const { messages, ended } = stream(path);
    const err = await ended;
    expect(err?.code).toBe(GrpcStatus.UNAVAILABLE);
    expect(err?.details).toBe("gone");
    expect(messages).toEqual(["x"]);
  });

  test("the runtime crashing ends an open stream with UNAVAILABLE", async () => {
    const path = socketPath();
    serve(path, async (c, req) => {
      c.headers(req.id, OK_HEADERS);
      await sendData(c, req.id, frame(Buffer.from("x")));
      // its socket closes with no HTTP/2 goodbye
      await Bun.sleep(30);
      c.close();
    });
    const { messages, ended } = stream(path);
    expect((await ended)?.code).toBe(GrpcStatus.UNAVAILABLE);
    expect(messages).toEqual(["x"]);
  });

  test("aborting the signal ends the stream with CANCELLED and resets it", async () => {
    const path = socketPath();
    const server = serve(path, async (c, req) => {
      c.headers(req.id, OK_HEADERS);
      await sendData(c, req.id, frame(Buffer.from("x")));
    });
    const ac = new AbortController();
    const { messages, ended } = stream(path, ac.signal);
    while (messages.length === 0) await Bun.sleep(5);
    ac.abort();
    expect((await ended)?.code).toBe(GrpcStatus.CANCELLED);
    expect(await resetCode(server.connections[0] as RawConn, 1)).toBe(CANCEL);
  });

  test("a message over the size limit ends the stream with RESOURCE_EXHAUSTED", async () => {
    const path = socketPath();
    const server = serve(path, async (c, req) => {
      c.headers(req.id, OK_HEADERS);
      await sendData(c, req.id, frame(Buffer.alloc(10_000)));
    });
    const { ended } = stream(path, undefined, 4096);
    expect((await ended)?.code).toBe(GrpcStatus.RESOURCE_EXHAUSTED);
    expect(await resetCode(server.connections[0] as RawConn, 1)).toBe(CANCEL);
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
    // RFC 9113's error codes: REFUSED_STREAM, CANCEL, ENHANCE_YOUR_CALM, INTERNAL_ERROR
    expect([0x7, 0x8, 0xb, 0x2].map(statusOfReset)).toEqual([
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
