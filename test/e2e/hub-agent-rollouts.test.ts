// Agent rollouts through the compiled hub (docs/hub-releases.md, "Rolling a release out to a
// fleet"): `fleetlet hub upgrade`, `fleetlet rollout status|pause|resume|undo agentrollout/NAME`,
// with agents spoken at the protocol level (ProtocolClient) that announced "updates" and report
// update.status as the test tells them. The release is a signed copy of /usr/bin/true (an ELF of
// this machine's arch: the hub checks its size and sha256, the fake agents never run it), so a
// push takes milliseconds. Needs dist/fleetlet (scripts/build); no root, no test bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { nodeReport, ProtocolClient, TestHub } from "../lib/hub.ts";
import { eventually, fleetletBin } from "../lib/testbed.ts";

const dir = mkdtempSync(join(tmpdir(), "hub-agent-rollouts-"));
const exe = join(dir, "fleetlet");
const V = "9.9.1-ar";
const hub = new TestHub(["--rollout-interval", "200ms"]);

function run(args: string[]) {
  const p = Bun.spawnSync([fleetletBin, ...args], { stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode, stdout: p.stdout.toString(), stderr: p.stderr.toString() };
}

function hubCli(...args: string[]) {
  return run([...args, "--hub", hub.url, "--token", hub.operatorToken]);
}

/** A device's agent at the protocol level: joined with hub labels, running 0.1.0. */
class FakeAgent {
  client: ProtocolClient | undefined;
  credential = "";
  constructor(
    readonly name: string,
    readonly labels: Record<string, string>,
  ) {}

  async join(): Promise<void> {
    const res = await hub.join(await hub.joinToken("1h", this.labels), this.name);
    expect(res.status).toBe(200);
    this.credential = ((await res.json()) as { credential: string }).credential;
  }

  /** Connects, says hello running `version` and reports its Node; waits until the hub knows its
   * arch. */
  async connect(version = "0.1.0"): Promise<void> {
    const c = new ProtocolClient(hub.url, this.credential);
    this.client = c;
    await c.opened;
    c.send({
      type: "hello",
      protocolVersion: 1,
      nodeName: this.name,
      agentVersion: version,
      streamId: `s-${Date.now()}`,
      features: ["updates"],
    });
    await c.waitFor("welcome");
    c.send(nodeReport(this.name));
    await eventually("the node's arch on the hub", () => this.update().then((u) => u.arch));
  }

  /** The versions the hub offered it, in order. */
  offers(): string[] {
    return (this.client?.received ?? [])
      .filter((m) => m.type === "update")
      .map((m) => String(m.version));
  }

  waitOffer(version: string): Promise<true> {
    return eventually(`an offer of ${version} to ${this.name}`, () =>
      this.offers().includes(version) ? true : undefined,
    );
  }

  report(phase: string, reason?: string): void {
    this.client?.send({ type: "update.status", version: V, phase, ...(reason && { reason }) });
  }

  async update(): Promise<{ arch?: string; wanted?: string }> {
    return (await hub.api(`/api/v1/nodes/${this.name}/update`)).json() as Promise<{
      arch?: string;
      wanted?: string;
    }>;
  }

  close(): void {
    this.client?.close();
  }
}

const agents = new Map<string, FakeAgent>();
const agent = (name: string) => agents.get(name) as FakeAgent;

type View = {
  phase: string;
  message: string;
  failed?: { node: string; message: string; rolledBack: boolean };
  counts: Record<string, number>;
  nodes: { node: string; from?: string; wanted?: string }[];
};

async function view(name: string): Promise<View> {
  return (await hub.api(`/api/v1/agentrollouts/${name}`)).json() as Promise<View>;
}

function phaseIs(name: string, phase: string): Promise<View> {
  return eventually(`agent rollout ${name} ${phase}`, async () => {
    const v = await view(name);
    return v.phase === phase ? v : undefined;
  });
}

/** Waits for `n` rollout passes of the hub (the pass runs every 200 ms). */
const passes = (n: number) => Bun.sleep(200 * n + 100);

beforeAll(async () => {
  copyFileSync("/usr/bin/true", exe);
  expect(run(["release", "keygen", "--out", join(dir, "ops")]).code).toBe(0);
  const signed = run(["release", "sign", "--key", join(dir, "ops.key"), "--version", V, exe]);
  expect(signed.stderr).toBe("");
  hub.port = 20_000 + Math.floor(Math.random() * 12_000);
  await hub.start();
  const push = hubCli("hub", "release", "push", exe, "--signature", `${exe}.sig`);
  expect(push.stderr).toBe("");
  const fleets = { a: 3, b: 3, c: 3, d: 2 };
  for (const [fleet, n] of Object.entries(fleets))
    for (let i = 1; i <= n; i++) {
      const a = new FakeAgent(`${fleet}-${i}`, { fleet });
      agents.set(a.name, a);
      await a.join();
      await a.connect();
    }
}, 120_000);
afterAll(async () => {
  for (const a of agents.values()) a.close();
  await hub.cleanup();
  rmSync(dir, { recursive: true, force: true });
});

describe("agent rollouts (compiled hub)", () => {
  test("fleetlet hub --help and rollout --help list the agent rollout commands", () => {
    const help = run(["hub", "--help"]);
    expect(help.stdout + help.stderr).toContain(
      "fleetlet hub upgrade NAME --version V [-l SELECTOR]",
    );
    expect(help.stdout + help.stderr).toContain("fleetlet hub upgrade list|delete [NAME]");
    const rollout = run(["rollout", "--help"]);
    expect(rollout.stdout).toContain("fleetlet rollout pause|resume|undo agentrollout/NAME");
  });

  test("a device's credential cannot create a rollout (403)", async () => {
    const res = await hub.api(
      "/api/v1/agentrollouts/x",
      { method: "PUT", body: JSON.stringify({ version: V }) },
      agent("a-1").credential,
    );
    expect(res.status).toBe(403);
  });

  test("a canary step, then the rest; rollout status says so, kubectl-style", async () => {
    const up = hubCli(
      "hub",
      "upgrade",
      "ra",
      "--version",
      V,
      "-l",
      "fleet=a",
      "--max-unavailable",
      "2",
    );
    expect(up.stderr).toBe("");
    expect(up.stdout).toBe("agentrollout/ra created\n");
    await agent("a-1").waitOffer(V);
    await passes(3);
    expect(agent("a-2").offers()).toEqual([]);
    expect(agent("a-3").offers()).toEqual([]);
    const waiting = hubCli("rollout", "status", "agentrollout/ra", "--watch=false");
    expect(waiting.stdout).toStartWith(
      'Waiting for agent rollout "ra" to finish: canary: 0 of 1 updated nodes are healthy...\n',
    );
    expect(waiting.stdout).toMatch(/\na-1 +yes +0\.1\.0 +0\.1\.0 +9\.9\.1-ar +- +-\n/);
    agent("a-1").report("healthy");
    await agent("a-2").waitOffer(V);
    await agent("a-3").waitOffer(V);
    agent("a-2").report("downloading");
    await eventually("a-2 downloading", async () =>
      (await view("ra")).message === "1 of 3 updated nodes are healthy" ? true : undefined,
    );
    agent("a-2").report("healthy");
    agent("a-3").report("healthy");
    const done = hubCli("rollout", "status", "agentrollout/ra", "--timeout", "20s");
    expect(done.stdout).toEndWith('agent rollout "ra" successfully rolled out\n');
    expect(done.code).toBe(0);
    const v = await view("ra");
    expect(v.counts).toEqual({ members: 3, updated: 3, healthy: 3, unavailable: 0, offline: 0 });
    expect(v.nodes.map((n) => n.from)).toEqual(["0.1.0", "0.1.0", "0.1.0"]);
  }, 60_000);

  test("a per-node update of a member is refused with 409 naming its rollout", () => {
    const out = hubCli("hub", "update", "a-1", "--version", V);
    expect(out.code).toBe(1);
    expect(out.stderr).toContain("Error from server (Conflict): node a-1 is in agent rollout ra");
  });

  test("a canary that is rolled back fails the rollout: no other node is offered the version, the canaries get their from", async () => {
    const up = hubCli("hub", "upgrade", "rb", "--version", V, "-l", "fleet=b", "--canary", "2");
    expect(up.stdout).toBe("agentrollout/rb created\n");
    await agent("b-1").waitOffer(V);
    await agent("b-2").waitOffer(V);
    agent("b-2").report("healthy");
    agent("b-1").report("rolled-back", "trial-crashed");
    const failed = await phaseIs("rb", "Failed");
    expect(failed.failed).toEqual({
      node: "b-1",
      message: `its agent was rolled back from ${V} (trial-crashed)`,
      rolledBack: true,
    });
    expect(failed.nodes.map((n) => [n.node, n.from, n.wanted])).toEqual([
      ["b-1", "0.1.0", "0.1.0"],
      ["b-2", "0.1.0", "0.1.0"],
      ["b-3", undefined, undefined],
    ]);
    await passes(3);
    expect(agent("b-3").offers()).toEqual([]);
    expect((await agent("b-3").update()).wanted).toBeUndefined();
    const status = hubCli("rollout", "status", "agentrollout/rb");
    expect(status.code).toBe(1);
    expect(status.stdout).toMatch(/\nb-3 +yes +0\.1\.0 +- +- +- +-\n/);
    expect(status.stderr).toContain(
      `agent rollout "rb" rollout of ${V} stopped on node b-1: its agent was rolled back from ${V} (trial-crashed); the nodes that got it were sent their previous version again`,
    );
  }, 30_000);

  test("a rollout that would take a member of one that is not Complete is refused with 409", () => {
    const out = hubCli("hub", "upgrade", "rx", "--version", V, "-l", "fleet in (a,b)");
    expect(out.code).toBe(1);
    expect(out.stderr).toContain(
      'agent rollout "rx" would take node "b-1" of agent rollout "rb", which is not Complete (Failed)',
    );
  });

  test("pause holds the rollout, resume goes on, undo sends the moved nodes their from", async () => {
    hubCli("hub", "upgrade", "rc", "--version", V, "-l", "fleet=c");
    await agent("c-1").waitOffer(V);
    expect(hubCli("rollout", "pause", "agentrollout/rc").stdout).toBe("agentrollout/rc paused\n");
    agent("c-1").report("healthy");
    await passes(3);
    expect((await view("rc")).phase).toBe("Paused");
    expect(agent("c-2").offers()).toEqual([]);
    expect(hubCli("rollout", "resume", "agentrollout/rc").stdout).toBe("agentrollout/rc resumed\n");
    await agent("c-2").waitOffer(V);
    expect(hubCli("rollout", "undo", "agentrollout/rc").stdout).toBe(
      "agentrollout/rc rolled back\n",
    );
    const undone = await view("rc");
    expect(undone.phase).toBe("RolledBack");
    expect(undone.nodes.map((n) => [n.node, n.wanted])).toEqual([
      ["c-1", "0.1.0"],
      ["c-2", "0.1.0"],
      ["c-3", undefined],
    ]);
    const status = hubCli("rollout", "status", "agentrollout/rc");
    expect(status.code).toBe(1);
    expect(status.stderr).toContain('agent rollout "rc" undone');
  }, 30_000);

  test("a hub restarted mid-rollout goes on from where it stood", async () => {
    hubCli("hub", "upgrade", "rd", "--version", V, "-l", "fleet=d");
    await agent("d-1").waitOffer(V);
    for (const a of agents.values()) a.close();
    await hub.stop();
    await hub.start();
    for (const n of ["d-1", "d-2"]) await agent(n).connect();
    // The agents of "ra" took the release: they come back running it.
    for (const n of ["a-1", "a-2", "a-3"]) await agent(n).connect(V);
    await agent("d-1").waitOffer(V);
    await passes(3);
    expect(agent("d-2").offers()).toEqual([]);
    expect((await view("rd")).phase).toBe("Canary");
    agent("d-1").report("healthy");
    await agent("d-2").waitOffer(V);
    agent("d-2").report("healthy");
    const done = await phaseIs("rd", "Complete");
    expect(done.nodes.map((n) => [n.node, n.from, n.wanted])).toEqual([
      ["d-1", "0.1.0", V],
      ["d-2", "0.1.0", V],
    ]);
  }, 60_000);

  test("list and delete; a deleted rollout's nodes keep their wishes; every action is audited", async () => {
    const list = hubCli("hub", "upgrade", "list");
    expect(list.stdout).toMatch(/^NAME +VERSION +SELECTOR +PHASE +UPDATED +HEALTHY +AGE\n/);
    expect(list.stdout).toMatch(/\nra +9\.9\.1-ar +fleet=a +Complete +3\/3 +3\/3 +\S+\n/);
    // b-2's healthy status went with the restart (statuses are kept in memory), and its agent
    // did not come back.
    expect(list.stdout).toMatch(/\nrb +9\.9\.1-ar +fleet=b +Failed +0\/3 +0\/3 +\S+\n/);
    expect(hubCli("hub", "upgrade", "delete", "rb").stdout).toBe("agentrollout/rb deleted\n");
    expect(hubCli("hub", "upgrade", "list").stdout).not.toContain("\nrb ");
    expect((await agent("b-1").update()).wanted).toBe("0.1.0");
    expect(hubCli("hub", "update", "b-3", "--version", V).code).toBe(0);
    const missing = hubCli("hub", "upgrade", "delete", "rb");
    expect(missing.stderr).toContain('agent rollout "rb" not found');
    const audit = hubCli("hub", "audit").stdout;
    for (const line of [
      "create agentrollout/ra 9.9.1-ar",
      "pause agentrollout/rc 9.9.1-ar",
      "resume agentrollout/rc 9.9.1-ar",
      "undo agentrollout/rc 9.9.1-ar",
      "delete agentrollout/rb 9.9.1-ar",
    ])
      expect(audit).toMatch(new RegExp(`agentrollout +- +- +- +${line.replaceAll(".", "\\.")} `));
    expect(audit).toMatch(/agentrollout +- +- +- +create agentrollout\/rx 9\.9\.1-ar .*refused: /);
  }, 30_000);
});
