// The WebSocket client against Bun's server: frames both ways, subprotocols, refusals, pausing.
import { afterAll, describe, expect, test } from "bun:test";
import { connectWebSocket, WsHandshakeError } from "../../../src/util/ws-client.ts";
import { until } from "../../lib/until.ts";

let echoed = 0;
const server = Bun.serve<{ protocol: string }>({
  port: 0,
  hostname: "127.0.0.1",
  fetch(req, srv) {
    if (new URL(req.url).pathname === "/refuse")
      return new Response('{"kind":"Status","message":"no"}', { status: 403 });
    const protocol = req.headers.get("sec-websocket-protocol")?.split(",")[0]?.trim() ?? "";
    if (srv.upgrade(req, { data: { protocol }, headers: { "Sec-WebSocket-Protocol": protocol } }))
      return;
    return new Response("upgrade", { status: 400 });
  },
  websocket: {
    open(ws) {
      ws.send(Uint8Array.of(9, 9));
    },
    message(ws, m) {
      echoed++;
      if (m === "close") ws.close(4000, "asked");
      else ws.send(typeof m === "string" ? `echo:${m}` : Buffer.concat([Buffer.from("echo:"), m]));
    },
  },
});
afterAll(() => server.stop(true));
const url = `ws://127.0.0.1:${server.port}/x`;

describe("connectWebSocket()", () => {
  test("agrees a subprotocol and exchanges text and binary frames of any size", async () => {
    const ws = await connectWebSocket({ url, protocols: ["v5.channel.k8s.io"] });
    expect(ws.protocol).toBe("v5.channel.k8s.io");
    const got: string[] = [];
    const three = new Promise<void>((resolve) =>
      ws.onMessage((d, text) => {
        got.push(`${text ? "t" : "b"}${d.length}`);
        if (got.length === 3) resolve();
      }),
    );
    ws.send("hi");
    ws.send(new Uint8Array(70_000).fill(7));
    await three;
    expect(got).toEqual(["b2", "t7", "b70005"]);
    const closed = new Promise<[number, string]>((r) => ws.onClose((c, why) => r([c, why])));
    ws.send("close");
    expect(await closed).toEqual([4000, "asked"]);
  });

  test("rejects with the server's status and body when it does not upgrade", async () => {
    const err = await connectWebSocket({ url: `ws://127.0.0.1:${server.port}/refuse` }).catch(
      (e) => e,
    );
    expect(err).toBeInstanceOf(WsHandshakeError);
    expect(err.status).toBe(403);
    expect(err.body).toContain('"message":"no"');
  });

  test("while paused, holds the peer's messages and delivers them on resume", async () => {
    const ws = await connectWebSocket({ url });
    const got: number[] = [];
    ws.onMessage((d) => got.push(d.length));
    await until("the greeting", () => got.length === 1);
    ws.pause();
    const before = echoed;
    ws.send(new Uint8Array(10));
    await until("the server to echo", () => echoed > before);
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    expect(got).toEqual([2]);
    ws.resume();
    await until("the echo after resume", () => got.length === 2);
    expect(got).toEqual([2, 15]);
    ws.close();
  });
});
