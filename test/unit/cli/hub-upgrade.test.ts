// `fleetlet hub upgrade` (src/cli/hub-upgrade.ts) against a stand-in hub on loopback: the spec
// its flags make, what it prints of the hub's answer, and the mistakes it refuses before asking.
import { afterAll, describe, expect, test } from "bun:test";
import { hubUpgradeCommand } from "../../../src/cli/hub-upgrade.ts";
import { captureIO } from "../../lib/cli-io.ts";

const seen: { method: string; path: string; body: unknown }[] = [];
const server = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  fetch: async (req) => {
    const path = new URL(req.url).pathname;
    const text = await req.text();
    seen.push({ method: req.method, path, body: text === "" ? undefined : JSON.parse(text) });
    return Response.json({ spec: {} }, { headers: { "x-fleetlet-result": "configured" } });
  },
});
afterAll(() => server.stop(true));

function io() {
  const { out, io: cli } = captureIO();
  return { out, cli };
}

const hub = () => ["--hub", `http://127.0.0.1:${server.port}`, "--token", "flo_x"];

describe("fleetlet hub upgrade", () => {
  test("NAME with every flag PUTs the spec they make and prints what the hub did", async () => {
    const { out, cli } = io();
    seen.length = 0;
    const code = await hubUpgradeCommand(
      [
        "eu",
        "--version",
        "0.2.0",
        "-l",
        "region=eu",
        "--canary",
        "2",
        "--max-unavailable",
        "25%",
        "--progress-deadline",
        "90s",
        "--no-auto-rollback",
        ...hub(),
      ],
      cli,
    );
    expect(code).toBe(0);
    expect(out.stdout).toBe("agentrollout/eu configured\n");
    expect(seen).toEqual([
      {
        method: "PUT",
        path: "/api/v1/agentrollouts/eu",
        body: {
          version: "0.2.0",
          selector: "region=eu",
          canary: 2,
          maxUnavailable: "25%",
          progressDeadlineSeconds: 90,
          autoRollback: false,
        },
      },
    ]);
  });

  test("NAME with only --version leaves the rest to the hub's defaults", async () => {
    seen.length = 0;
    await hubUpgradeCommand(["all", "--version", "0.2.0", ...hub()], io().cli);
    expect(seen[0]?.body).toEqual({ version: "0.2.0", selector: "", autoRollback: true });
  });

  test.each([
    [["eu", ...hub()], "hub upgrade NAME needs --version V"],
    [
      ["eu", "--version", "1", "--max-unavailable", "x", ...hub()],
      'invalid argument "x" for "--max-unavailable" flag',
    ],
    [["eu", "extra", "--version", "1", ...hub()], "hub upgrade takes one rollout name"],
    [["delete", ...hub()], "hub upgrade delete takes one rollout name"],
  ])("%p is refused before asking the hub", async (argv, message) => {
    seen.length = 0;
    await expect(hubUpgradeCommand(argv, io().cli)).rejects.toThrow(message);
    expect(seen).toEqual([]);
  });
});
