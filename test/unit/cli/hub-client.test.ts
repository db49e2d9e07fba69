// The operator's hub client (src/cli/hub-client.ts): how a hub's refusals read, over loopback HTTP.
import { afterAll, describe, expect, test } from "bun:test";
import { hubSend } from "../../../src/cli/hub-client.ts";

const server = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  // Bun refuses a body over this with a bare 413, before the hub's code sees the request.
  maxRequestBodySize: 1000,
  fetch: (req) =>
    new URL(req.url).pathname === "/conflict"
      ? Response.json(
          { kind: "Status", reason: "Conflict", message: "already stored" },
          { status: 409 },
        )
      : Response.json({ ok: true }),
});
const target = { url: `http://127.0.0.1:${server.port}`, token: "flo_x" };
afterAll(() => server.stop(true));

describe("hubSend()", () => {
  test("a body over the hub's largest is refused as too large, in those words", async () => {
    await expect(hubSend(target, "PUT", "/up", { body: new Uint8Array(5000) })).rejects.toThrow(
      `PUT /up on ${target.url}: the hub refused the request as too large (HTTP 413)`,
    );
  });

  test("a Status refusal reads as kubectl prints it; an answer is returned", async () => {
    await expect(hubSend(target, "PUT", "/conflict", { body: "x" })).rejects.toThrow(
      "Error from server (Conflict): already stored",
    );
    const ok = await hubSend<{ ok: boolean }>(target, "PUT", "/up", { body: "x" });
    expect(ok.body.ok).toBe(true);
  });
});
