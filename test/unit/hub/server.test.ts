// The hub's server under a WebSocket peer that stops reading: what the hub sends waits in the
// socket's send buffer up to its limit, then the connection is closed; no message is dropped
// on a connection that stays open.
import { expect, test } from "bun:test";
import { type SocketHandler, serveHub } from "../../../src/hub/server.ts";
import { until } from "../../lib/until.ts";

const CHUNK = 64 * 1024;

test("closes a WebSocket whose peer stops reading once 20 MiB wait for it, rather than drop messages and go on", async () => {
  const answers: number[] = [];
  let closed: number | undefined;
  const sender: SocketHandler = {
    open: () => {},
    // Sends 64 MiB at once, while the socket is open.
    message: (ws) => {
      const chunk = "x".repeat(CHUNK);
      for (let i = 0; i < 1024 && ws.readyState === 1; i++) answers.push(ws.send(chunk));
    },
    close: (_ws, code) => {
      closed = code;
    },
  };
  const server = serveHub({
    hostname: "127.0.0.1",
    port: 0,
    maxPayloadLength: 1024,
    idleTimeoutSeconds: 60,
    upgrades: { "/ws": () => ({ data: { kind: "sender" } }) },
    sockets: { sender },
    fetch: () => new Response("not found", { status: 404 }),
  });
  try {
    let received = "";
    const client = await Bun.connect({
      hostname: "127.0.0.1",
      port: server.port ?? 0,
      socket: {
        data: (_s, d) => {
          received += d.toString("latin1");
        },
      },
    });
    client.write(
      "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    );
    await until("the upgrade", () => received.startsWith("HTTP/1.1 101"));
    client.pause();
    client.write(new Uint8Array([0x81, 0x82, 0, 0, 0, 0, 0x68, 0x69]));
    await until("the hub's sends", () => answers.length > 0);
    // Past the limit the connection closes (at the end of this turn of the event loop): what
    // the hub sent meanwhile is dropped with it, never on a connection that goes on.
    // (send() answers -1 for a message that waits in the send buffer, 0 for one dropped.)
    const firstDropped = answers.indexOf(0);
    const waiting = answers.slice(0, firstDropped).filter((a) => a === -1).length;
    expect(waiting * CHUNK).toBeGreaterThanOrEqual(20 * 1024 * 1024 - CHUNK);
    expect(answers.slice(firstDropped).every((a) => a === 0)).toBe(true);
    await until("the connection closed", () => closed !== undefined, 3000);
    client.end();
  } finally {
    server.stop(true);
  }
});
