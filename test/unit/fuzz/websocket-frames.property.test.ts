// Properties of the hub's WebSocket endpoints under hostile connections at the socket level,
// against a real hub in this process: raw TCP connections do the HTTP upgrade by hand (with no, a
// wrong or a valid node credential, to the agents' endpoint or the operators' watch; or a broken
// handshake), then send generated frames (valid ones, frames breaking one rule of RFC 6455, huge
// length fields, frames cut off, random bytes). Per input: a broken handshake gets a 4xx (never
// 101) and the hub ends the connection; a credential that is not a node's is closed with 4401 at
// once; the first violation closes the connection with its RFC code (unless the hub closed it
// first over a message, with a code of the agent protocol), a length beyond the hub's limit on its
// header alone; every ping before that gets its pong; the connection ends within a deadline;
// nothing it sent shows up as state; the other agents and the API keep being served.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import fc from "fast-check";
import { CLOSE_CODES } from "../../../src/protocol/index.ts";
import { fuzz, fuzzTimeout } from "../../lib/fuzz.ts";
import { until } from "../../lib/until.ts";
import {
  canaryState,
  type InProcessHub,
  otherAgentServed,
  startInProcessHub,
} from "./hub-in-process.ts";
import {
  clientFrames,
  encodeFrame,
  type FrameSpec,
  OP,
  readServerFrames,
  verdictOf,
} from "./ws-frames.ts";

/** How long a hostile connection may stay after its last byte (a deadline, not a speed). */
const DEADLINE_MS = 5000;

/** A raw TCP connection: what it received, whether it closed, writes queued over backpressure. */
class Raw {
  received = Buffer.alloc(0);
  closed = false;
  private readonly queue: Uint8Array[] = [];
  private ending = false;
  private onClose = () => {};
  private sock!: Bun.Socket<undefined>;

  static async open(port: number): Promise<Raw> {
    const r = new Raw();
    r.sock = await Bun.connect({
      hostname: "127.0.0.1",
      port,
      socket: {
        data: (_s, d) => {
          r.received = Buffer.concat([r.received, d]);
        },
        drain: () => r.flush(),
        close: () => {
          r.closed = true;
          r.onClose();
        },
        error: () => {},
      },
    });
    return r;
  }

  write(b: Uint8Array | string): void {
    this.queue.push(typeof b === "string" ? Buffer.from(b, "latin1") : b);
    this.flush();
  }

  end(): void {
    this.ending = true;
    this.flush();
  }

  private flush(): void {
    while (this.queue.length > 0 && !this.closed) {
      const b = this.queue[0] as Uint8Array;
      const n = this.sock.write(b);
      if (n < b.length) {
        this.queue[0] = b.subarray(Math.max(0, n));
        return;
      }
      this.queue.shift();
    }
    if (this.ending && !this.closed) this.sock.end();
  }

  /** Waits until `done` holds or the connection closed; false after `ms`. */
  async wait(done: () => boolean, ms = DEADLINE_MS): Promise<boolean> {
    const deadline = Date.now() + ms;
    while (!done() && !this.closed && Date.now() < deadline)
      await new Promise<void>((res) => {
        this.onClose = res;
        setTimeout(res, 2);
      });
    return done() || this.closed;
  }

  /** The HTTP status of the answer to the handshake, and the bytes after its header. */
  response(): { status?: number; rest: Buffer } {
    const end = this.received.indexOf("\r\n\r\n");
    if (end < 0) return { rest: Buffer.alloc(0) };
    const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(this.received.toString("latin1"))?.[1]);
    return { status, rest: this.received.subarray(end + 4) };
  }
}

const HANDSHAKES = {
  valid: (l: string[]) => l,
  "no Upgrade": (l: string[]) => l.filter((x) => !x.startsWith("Upgrade")),
  "Upgrade: h2c": (l: string[]) => l.map((x) => x.replace("Upgrade: websocket", "Upgrade: h2c")),
  "no key": (l: string[]) => l.filter((x) => !x.startsWith("Sec-WebSocket-Key")),
  "short key": (l: string[]) => l.map((x) => x.replace(/Key: .*/, "Key: abc")),
  "key not base64": (l: string[]) => l.map((x) => x.replace(/Key: .*/, `Key: ${"!".repeat(24)}`)),
  "version 8": (l: string[]) => l.map((x) => x.replace("Version: 13", "Version: 8")),
  "no version": (l: string[]) => l.filter((x) => !x.startsWith("Sec-WebSocket-Version")),
  POST: (l: string[]) => [l[0]?.replace("GET", "POST") ?? "", ...l.slice(1)],
  "huge header": (l: string[]) => [...l, `X-Pad: ${"a".repeat(70_000)}`],
  "many headers": (l: string[]) => [...l, ...Array.from({ length: 3000 }, (_, i) => `X-${i}: v`)],
  "NUL in a header": (l: string[]) => [...l, "X-A\u0000: v"],
  "bare LF": (l: string[]) => [...l, "X-A: v\nX-B: w"],
} as const;
type Handshake = keyof typeof HANDSHAKES | "cut off";

type Auth = "none" | "garbage" | "join token" | "operator token" | "cam-3";

interface Input {
  /** The agents' endpoint, or the operators' watch stream (which ignores what it is sent). */
  path: "agent" | "watch";
  handshake: Handshake;
  auth: Auth;
  body: { frames: FrameSpec[] } | { bytes: Uint8Array };
  key: Uint8Array;
  /** Frames to the agents' endpoint go right behind the request, before the 101 came. */
  pipelined: boolean;
}

const input: fc.Arbitrary<Input> = fc.record({
  path: fc.oneof(
    { weight: 4, arbitrary: fc.constant("agent" as const) },
    { weight: 1, arbitrary: fc.constant("watch" as const) },
  ),
  handshake: fc.oneof(
    { weight: 12, arbitrary: fc.constant("valid" as const) },
    {
      weight: 3,
      arbitrary: fc.constantFrom(...(Object.keys(HANDSHAKES) as Handshake[]), "cut off"),
    },
  ),
  auth: fc.oneof(
    { weight: 4, arbitrary: fc.constant("cam-3" as const) },
    {
      weight: 2,
      arbitrary: fc.constantFrom<Auth>("none", "garbage", "join token", "operator token"),
    },
  ),
  body: fc.oneof(
    { weight: 5, arbitrary: clientFrames.map((frames) => ({ frames })) },
    {
      weight: 1,
      arbitrary: fc.uint8Array({ minLength: 1, maxLength: 300 }).map((bytes) => ({ bytes })),
    },
  ),
  key: fc.uint8Array({ minLength: 4, maxLength: 4 }),
  pipelined: fc.boolean(),
});

let h: InProcessHub;
let port: number;
let bearer: Record<Auth, string | undefined>;
let canaries: unknown[];
let slowestCloseMs = 0;

/** A node's own data the hub holds: pods, events and the last seq it stored. */
function dataOf(n: string) {
  const f = h.hub.fleet;
  return {
    pods: [...f.podsOf(n).values()],
    events: [...f.eventsOf(n).values()],
    seq: f.receivedSeq(n),
  };
}

/** What no hostile connection may change: the nodes; the data of cam-3 too without its credential. */
function snapshot(auth: Auth): string {
  const nodes = [...h.hub.fleet.nodes.keys()].sort();
  const others = auth === "cam-3" ? ["cam-1", "cam-2"] : ["cam-1", "cam-2", "cam-3"];
  return JSON.stringify({ nodes, data: others.map(dataOf) });
}

beforeAll(async () => {
  h = await startInProcessHub();
  port = Number(new URL(h.url).port);
  const tok = await h.api("/api/v1/join-tokens", { method: "POST", body: "{}" });
  const { token } = (await tok.json()) as { token: string };
  const unused = await h.api("/api/v1/join-tokens", { method: "POST", body: "{}" });
  const joined = await fetch(`${h.url}/api/v1/join`, {
    method: "POST",
    body: JSON.stringify({ joinToken: token, nodeName: "cam-3" }),
  });
  const { credential } = (await joined.json()) as { credential: string };
  bearer = {
    none: undefined,
    garbage: "flc_not-a-credential",
    "join token": ((await unused.json()) as { token: string }).token,
    "operator token": h.token,
    "cam-3": credential,
  };
  canaries = await canaryState(h);
});
afterAll(async () => {
  if (process.env.FLEETLET_FUZZ_REPORT)
    console.log(`websocket-frames: slowest close ${slowestCloseMs} ms`);
  await h.stop();
});

function request(i: Input): string {
  const auth = bearer[i.auth];
  const lines = [
    `GET /api/v1/${i.path === "agent" ? "agent/connect" : "watch"} HTTP/1.1`,
    `Host: 127.0.0.1:${port}`,
    "Upgrade: websocket",
    "Connection: Upgrade",
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
    "Sec-WebSocket-Version: 13",
    ...(auth === undefined ? [] : [`Authorization: Bearer ${auth}`]),
  ];
  if (i.handshake === "cut off") return lines.join("\r\n").slice(0, 60);
  return `${HANDSHAKES[i.handshake](lines).join("\r\n")}\r\n\r\n`;
}

/** The hub closes the connection within the deadline (after the client's last byte). */
async function closedInTime(c: Raw, what: string): Promise<void> {
  const t0 = performance.now();
  if (!(await c.wait(() => false))) throw new Error(`${what}: still open after ${DEADLINE_MS} ms`);
  slowestCloseMs = Math.max(slowestCloseMs, Math.round(performance.now() - t0));
}

const protocolCodes = new Set(Object.values(CLOSE_CODES));

/** Checks the hub's answer to frames after a valid upgrade: close codes and pongs. */
function checkFrames(i: Input, frames: FrameSpec[], rest: Buffer): void {
  const got = readServerFrames(rest);
  const close = got.find((f) => f.opcode === OP.close);
  const code =
    close && close.payload.length >= 2
      ? (close.payload[0] as number) * 256 + (close.payload[1] as number)
      : undefined;
  expect(close).toBeDefined();
  if (i.path === "agent" && i.auth !== "cam-3") {
    expect(code).toBe(CLOSE_CODES.unauthorized);
    return;
  }
  const v = verdictOf(frames);
  if (i.path === "watch") v.messages = 0;
  const pongs = got.filter((f) => f.opcode === OP.pong).map((f) => [...f.payload]);
  const pings = v.pings.map((p) => [...p]);
  expect(pings.slice(0, pongs.length)).toEqual(pongs);
  if (v.messages > 0 && code !== undefined && protocolCodes.has(code)) return;
  expect(pongs.length).toBe(pings.length);
  if (v.violation !== undefined) expect(code).toBe(v.violation);
  else if (v.clientClose !== undefined) expect(code).toBe(v.clientClose.code);
  else if (!v.incomplete) expect(code).toBe(1000);
}

/** Sends one input; checks the handshake's answer, the close and its code. */
async function send(i: Input): Promise<void> {
  const c = await Raw.open(port);
  c.write(request(i));
  const frames = "frames" in i.body ? i.body.frames : [];
  const early = i.pipelined && i.handshake === "valid" && i.path === "agent";
  if (early) for (const f of frames) c.write(encodeFrame(f, i.key));
  if (i.handshake === "cut off") c.end();
  await c.wait(() => c.response().status !== undefined);
  const { status } = c.response();
  if (i.handshake !== "valid") {
    if (status !== undefined) expect(status >= 400 && status < 500).toBe(true);
    else c.end();
    return closedInTime(c, `handshake "${i.handshake}"`);
  }
  if (i.path === "watch" && i.auth !== "operator token") {
    expect(status).toBe(401);
    return closedInTime(c, "a watch without the operator token");
  }
  expect(status).toBe(101);
  if ("bytes" in i.body) {
    c.write(i.body.bytes);
    c.end();
    return closedInTime(c, "random bytes");
  }
  if (!early) for (const f of frames) c.write(encodeFrame(f, i.key));
  const v = verdictOf(frames);
  if (v.incomplete) c.end();
  else if (v.violation === undefined && v.clientClose === undefined)
    c.write(
      encodeFrame(
        { fin: true, rsv: 0, opcode: OP.close, masked: true, payload: new Uint8Array([3, 232]) },
        i.key,
      ),
    );
  await closedInTime(c, `frames ${frames.map((f) => f.opcode).join(",")}`);
  if (!v.incomplete) checkFrames(i, frames, c.response().rest);
}

describe("the hub's WebSocket endpoint under hostile frames and handshakes", () => {
  test(
    "closes each hostile connection with the right code in time, takes nothing from it, serves the others",
    async () => {
      await fuzz(
        "websocket-frames connections",
        input,
        async (i) => {
          const who = i.path === "agent" ? i.auth : "none";
          const before = snapshot(who);
          await send(i);
          await until(
            "only cam-1 and cam-2 connected",
            () => h.hub.connectedAgents() === 2,
            DEADLINE_MS,
          );
          expect(snapshot(who)).toBe(before);
          await otherAgentServed(h);
          expect((await h.api("/api/v1/nodes")).status).toBe(200);
        },
        { seed: 30_901, runs: 250 },
      );
      expect(await canaryState(h)).toEqual(canaries);
    },
    fuzzTimeout(600_000),
  );
});
