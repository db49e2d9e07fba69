// Hostile HTTP/2 servers, for the tests of our HTTP/2 client as a gRPC probe and a CRI client
// use it: each answers a request with exactly the frames of one attack, over the raw peer
// (h2-peer.ts). `reason` is what the failed call must say: the probe's output and the CRI
// error name it, so that a user can tell what the server did.
import { F, type RawConn, rawFrame, T, u32 } from "./h2-peer.ts";

export interface Attack {
  name: string;
  serve(c: RawConn): Promise<void>;
  /** What the call's error says (the header limit is the client's, given as `limit`). */
  reason(limit: number): RegExp;
  /** The attack breaks HTTP/2 itself, so the client closes the connection; otherwise only the
   * call's stream is reset (CANCEL). */
  breaksConnection: boolean;
}

const OK_HEADERS: [string, string][] = [
  [":status", "200"],
  ["content-type", "application/grpc"],
];

/** Writes `make()` in batches until the connection closes (the client gave up on us). */
async function forever(c: RawConn, make: () => Buffer, perBatch = 64): Promise<void> {
  while (!c.closed) {
    for (let i = 0; i < perBatch; i++) c.write(make());
    if (!(await c.flushed())) return;
    await Bun.sleep(1);
  }
}

/** The SETTINGS every attack but one starts with, then the client's request. */
async function start(c: RawConn): Promise<number> {
  c.settings();
  return (await c.request()).id;
}

const JUNK = Buffer.alloc(16_384, 0x61);

export const ATTACKS: readonly Attack[] = [
  {
    // The attack that took the agent to 1.2 GB: one header block that never ends.
    name: "endless-header-block",
    async serve(c) {
      const id = await start(c);
      c.send(T.HEADERS, 0, id, Buffer.from([0x88])); // :status 200, no END_HEADERS
      await forever(c, () => rawFrame(T.CONTINUATION, 0, id, JUNK));
    },
    reason: (limit) => new RegExp(`a header block larger than the limit of ${limit} bytes`),
    breaksConnection: true,
  },
  {
    name: "empty-continuations",
    async serve(c) {
      const id = await start(c);
      c.send(T.HEADERS, 0, id, Buffer.from([0x88]));
      await forever(c, () => rawFrame(T.CONTINUATION, 0, id, Buffer.alloc(0)), 4096);
    },
    reason: () => /a header block in \d+ frames/,
    breaksConnection: true,
  },
  {
    name: "huge-headers-frame",
    async serve(c) {
      const id = await start(c);
      c.write(rawFrame(T.HEADERS, F.END_HEADERS, id, Buffer.alloc(4 << 20, 0x61)));
      await c.whenClosed;
    },
    reason: () => /a frame of 4194304 bytes \(at most 16384\)/,
    breaksConnection: true,
  },
  {
    name: "settings-out-of-range",
    async serve(c) {
      c.settings([[5, 1]]); // SETTINGS_MAX_FRAME_SIZE 1 (at least 16384)
      await c.whenClosed;
    },
    reason: () => /SETTINGS_MAX_FRAME_SIZE 1 is out of range/,
    breaksConnection: true,
  },
  {
    name: "window-overflow",
    async serve(c) {
      const id = await start(c);
      c.send(T.WINDOW_UPDATE, 0, 0, u32(0x7fffffff));
      c.send(T.WINDOW_UPDATE, 0, id, u32(0x7fffffff));
      await c.whenClosed;
    },
    reason: () => /a WINDOW_UPDATE past 2\^31-1/,
    breaksConnection: true,
  },
  {
    name: "endless-data",
    async serve(c) {
      const id = await start(c);
      c.headers(id, OK_HEADERS);
      const message = Buffer.from([0, 0, 0, 0, 2, 0x08, 0x01]); // SERVING, again and again
      await forever(c, () => rawFrame(T.DATA, 0, id, Buffer.concat(Array(2000).fill(message))));
    },
    reason: () => /not one whole message \(more than one\)/,
    breaksConnection: false,
  },
  {
    name: "endless-message",
    async serve(c) {
      const id = await start(c);
      c.headers(id, OK_HEADERS);
      c.send(T.DATA, 0, id, Buffer.from([0, 0xff, 0xff, 0xff, 0xff]));
      await forever(c, () => rawFrame(T.DATA, 0, id, JUNK));
    },
    reason: () => /response larger than the limit of \d+ bytes/,
    breaksConnection: false,
  },
  {
    name: "push-storm",
    async serve(c) {
      const id = await start(c);
      let promised = 2;
      await forever(c, () => {
        const p = Buffer.concat([u32(promised), Buffer.from([0x82, 0x86, 0x84])]);
        promised += 2;
        return rawFrame(T.PUSH_PROMISE, F.END_HEADERS, id, p);
      });
    },
    reason: () => /pushed a stream though push is off/,
    breaksConnection: true,
  },
  {
    name: "stream-storm",
    async serve(c) {
      await start(c);
      let stream = 2;
      await forever(c, () => {
        const f = rawFrame(T.HEADERS, F.END_HEADERS, stream, Buffer.from([0x88]));
        stream += 2;
        return f;
      });
    },
    reason: () => /HEADERS on stream 2, never opened/,
    breaksConnection: true,
  },
];
