// `fleetlet hub update` (src/cli/hub-update.ts) against a stand-in hub on loopback: which request
// each form makes, a node called "status" among them.
import { afterAll, describe, expect, test } from "bun:test";
import { hubUpdateCommand } from "../../../src/cli/hub-update.ts";
import { captureIO } from "../../lib/cli-io.ts";

const seen: { method: string; path: string; body: unknown }[] = [];
const server = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  fetch: async (req) => {
    const path = new URL(req.url).pathname;
    const text = await req.text();
    seen.push({ method: req.method, path, body: text === "" ? undefined : JSON.parse(text) });
    if (req.method === "DELETE") return Response.json({ canceled: true });
    if (path === "/api/v1/updates") return Response.json({ items: [] });
    return Response.json({ node: "status", running: "0.1.0", wanted: "0.2.0" });
  },
});
afterAll(() => server.stop(true));

const hub = () => ["--hub", `http://127.0.0.1:${server.port}`, "--token", "flo_x"];

async function run(argv: string[]): Promise<{ stdout: string; stderr: string }> {
  const { out, io } = captureIO();
  seen.length = 0;
  expect(await hubUpdateCommand([...argv, ...hub()], io)).toBe(0);
  return out;
}

describe("fleetlet hub update", () => {
  test("status lists every node's update; status NODE shows one", async () => {
    expect((await run(["status"])).stderr).toBe("No node updates found\n");
    expect(seen).toEqual([{ method: "GET", path: "/api/v1/updates", body: undefined }]);
    await run(["status", "edge-1", "-o", "json"]);
    expect(seen).toEqual([{ method: "GET", path: "/api/v1/nodes/edge-1/update", body: undefined }]);
  });

  test("a node called status is set, canceled and shown like any other", async () => {
    expect((await run(["status", "--version", "0.2.0"])).stdout).toBe(
      "node/status update to 0.2.0 set\n",
    );
    expect(seen).toEqual([
      { method: "PUT", path: "/api/v1/nodes/status/update", body: { version: "0.2.0" } },
    ]);
    expect((await run(["status", "--cancel"])).stdout).toBe("node/status update canceled\n");
    expect(seen).toEqual([
      { method: "DELETE", path: "/api/v1/nodes/status/update", body: undefined },
    ]);
    await run(["status", "status"]);
    expect(seen).toEqual([{ method: "GET", path: "/api/v1/nodes/status/update", body: undefined }]);
  });
});
