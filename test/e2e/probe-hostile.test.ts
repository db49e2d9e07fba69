// gRPC probes against hostile servers, through the compiled agent: pods whose readiness probe
// dials a server that answers with one HTTP/2 attack each (test/lib/h2-attacks.ts: an endless
// header block, a huge HEADERS frame, SETTINGS out of range, a window overflow, endless DATA,
// push and stream storms). Each probe must fail with a reason naming what the server did, the
// agent's peak memory must stay near its baseline (an endless header block once took it from
// 59 MB to 1.2 GB), and a well-behaved gRPC probe and an exec probe beside them must stay
// ready. Needs root and the test bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import type { Event, Pod } from "../../src/api/types.ts";
import { TestAgent } from "../lib/agent.ts";
import { ATTACKS } from "../lib/h2-attacks.ts";
import { type RawServer, rawServer } from "../lib/h2-peer.ts";
import { probedPodManifest } from "../lib/manifests.ts";
import { type GRPCHealthServer, startGRPCHealthServer } from "../lib/probe-servers.ts";
import { eventually } from "../lib/testbed.ts";

/** How far the agent's peak RSS may rise over its baseline while the attacks run. */
const PEAK_RISE_LIMIT_MB = 12;
/** How long the attacks run (the probes' period is 1 s). */
const ATTACK_MS = 15_000;

const agent = new TestAgent();
let health: GRPCHealthServer;
const servers = new Map<string, RawServer>();

const pod = (name: string, probe: string) => probedPodManifest(name, agent.tb.busybox, probe);

/** kB of a /proc/PID/status field (VmRSS now, VmHWM the peak since the last reset). */
function procKb(field: "VmRSS" | "VmHWM"): number {
  const status = readFileSync(`/proc/${agent.proc?.pid}/status`, "utf8");
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status);
  if (m === null) throw new Error(`no ${field} in the agent's status`);
  return Number(m[1]);
}

const ready = (p: Pod | undefined) => p?.status?.containerStatuses?.[0]?.ready === true;

async function unhealthy(name: string): Promise<Event[]> {
  const events = await agent.events();
  return events.filter(
    (e) => e.involvedObject.name === `${name}-${agent.nodeName}` && e.reason === "Unhealthy",
  );
}

beforeAll(async () => {
  health = await startGRPCHealthServer();
  for (const attack of ATTACKS) {
    servers.set(
      attack.name,
      rawServer({ hostname: "127.0.0.1" }, (c) => attack.serve(c)),
    );
  }
  await agent.start();
  agent.writeManifest("benign-grpc.yaml", pod("benign-grpc", `grpc: { port: ${health.port} }`));
  agent.writeManifest("benign-exec.yaml", pod("benign-exec", `exec: { command: ["true"] }`));
}, 30_000);

afterAll(async () => {
  await agent.cleanup();
  for (const s of servers.values()) s.stop();
  await health?.stop();
}, 90_000);

describe("gRPC probes against hostile servers (needs root and the test bed)", () => {
  test("each attack fails its probe with a reason, memory stays near the baseline, other probes are unaffected", async () => {
    await agent.waitPod("benign-grpc", "Ready", ready, 60_000);
    await agent.waitPod("benign-exec", "Ready", ready, 60_000);
    // The baseline: the agent running its pods and probes, before any attack.
    let baselineKb = 0;
    for (let i = 0; i < 15; i++) {
      baselineKb = Math.max(baselineKb, procKb("VmRSS"));
      await Bun.sleep(200);
    }
    writeFileSync(`/proc/${agent.proc?.pid}/clear_refs`, "5"); // resets VmHWM to VmRSS
    const started = Date.now();
    for (const attack of ATTACKS) {
      const port = servers.get(attack.name)?.port;
      agent.writeManifest(
        `hostile-${attack.name}.yaml`,
        pod(`hostile-${attack.name}`, `grpc: { port: ${port} }`),
      );
    }
    for (const attack of ATTACKS) {
      const name = `hostile-${attack.name}`;
      const event = await eventually(
        `an Unhealthy event of ${name} naming the attack`,
        async () => (await unhealthy(name)).find((e) => attack.reason(16 * 1024).test(e.message)),
        60_000,
        250,
      );
      expect(event.message).toStartWith("Readiness probe failed: ");
    }
    // The attacks go on: every probe period dials each server again.
    while (Date.now() - started < ATTACK_MS) {
      expect(ready(await agent.pod("benign-grpc"))).toBe(true);
      expect(ready(await agent.pod("benign-exec"))).toBe(true);
      await Bun.sleep(500);
    }
    const peakKb = procKb("VmHWM");
    const rounds = ATTACKS.map((a) => servers.get(a.name)?.connections.length ?? 0);
    console.log(
      `agent RSS: baseline ${(baselineKb / 1024).toFixed(1)} MB, peak under attack ${(peakKb / 1024).toFixed(1)} MB ` +
        `(+${((peakKb - baselineKb) / 1024).toFixed(1)} MB); connections per attack: ${rounds.join(", ")}`,
    );
    for (const [i, attack] of ATTACKS.entries()) {
      expect({
        attack: attack.name,
        ready: ready(await agent.pod(`hostile-${attack.name}`)),
      }).toEqual({
        attack: attack.name,
        ready: false,
      });
      // dialled again and again: the probe never got stuck on the attack
      expect({ attack: attack.name, enough: (rounds[i] ?? 0) >= 5 }).toEqual({
        attack: attack.name,
        enough: true,
      });
    }
    expect(peakKb - baselineKb).toBeLessThan(PEAK_RISE_LIMIT_MB * 1024);
    expect(agent.proc?.exitCode).toBeNull();
  }, 150_000);
});
