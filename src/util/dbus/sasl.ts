// The D-Bus authentication handshake, client side, with the EXTERNAL mechanism only: the peer
// learns our uid from the socket itself, and we name it as the hex of its decimal digits. The
// peer's lines are bounded (MAX_LINE bytes); anything but "OK <guid>" to our AUTH fails.
import type { Socket } from "node:net";
import { abortReason } from "../clock.ts";

/** Longest line we accept from the peer while authenticating. */
const MAX_LINE = 512;

/** The AUTH line for `uid`: "AUTH EXTERNAL " and the hex of the uid's ASCII digits. */
export function authLine(uid: number): string {
  return `AUTH EXTERNAL ${Buffer.from(String(uid), "ascii").toString("hex")}\r\n`;
}

/** The peer's answer to AUTH: its server GUID, or throws naming what it said. */
export function parseAuthReply(line: string): string {
  const m = /^OK ([0-9a-fA-F]{32})$/.exec(line);
  if (m?.[1] === undefined) {
    throw new Error(
      `D-Bus authentication as EXTERNAL failed: the peer said ${JSON.stringify(line)}`,
    );
  }
  return m[1];
}

/**
 * Authenticates on a connected `socket` as `uid` and begins the binary protocol. Resolves with
 * the server's GUID and any bytes that came after the peer's OK line (the start of the message
 * stream); rejects if the peer refuses, closes, says too much, or `signal` aborts.
 */
export function authenticate(
  socket: Socket,
  uid: number,
  signal: AbortSignal,
): Promise<{ guid: string; rest: Uint8Array }> {
  return new Promise((resolve, reject) => {
    let got = Buffer.alloc(0);
    const done = (err: unknown, value?: { guid: string; rest: Uint8Array }) => {
      socket.off("data", onData);
      socket.off("close", onClose);
      signal.removeEventListener("abort", onAbort);
      if (value === undefined) reject(err);
      else resolve(value);
    };
    const onAbort = () => done(abortReason(signal));
    const onClose = () => done(new Error("D-Bus peer closed the connection while authenticating"));
    const onData = (chunk: Buffer) => {
      got = Buffer.concat([got, chunk]);
      const end = got.indexOf("\r\n");
      if (end < 0) {
        if (got.length > MAX_LINE) done(new Error(`D-Bus peer sent a line over ${MAX_LINE} bytes`));
        return;
      }
      try {
        const guid = parseAuthReply(got.subarray(0, end).toString("latin1"));
        socket.write("BEGIN\r\n");
        done(undefined, { guid, rest: new Uint8Array(got.subarray(end + 2)) });
      } catch (e) {
        done(e);
      }
    };
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort);
    socket.on("data", onData);
    socket.on("close", onClose);
    socket.write(Buffer.concat([Buffer.from([0]), Buffer.from(authLine(uid), "ascii")]));
  });
}
