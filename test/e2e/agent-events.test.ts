// Container exits seen through the runtime's event stream, not the relist: the agent relists
// only every 60 s here (both periods), so an exit, an OOM kill or a crash that shows in its API
// within seconds came through an event. Then containerd restarts while events flow: an exit
// during the gap and one after it are both seen, and nothing that kept running is restarted.
// The compiled agent against the real test bed; needs root and the test bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Pod } from "../../src/api/types.ts";
import { TestAgent } from "../lib/agent.ts";
import { shellPodManifest, sleeperManifest } from "../lib/manifests.ts";
import { startContainerd, stopContainerd } from "../lib/testbed.ts";

const agent = new TestAgent({
  args: ["--pleg-relist-period", "60s", "--pleg-evented-relist-period", "60s"],
});
const tb = agent.tb;
/** A host folder the "waiter" pods watch: a file named after a pod makes it exit 7. */
const hostDir = mkdtempSync(join(tmpdir(), "fleetlet-events-e2e-"));
/** Within this, an exit came through an event: the relist runs every 60 s. */
const SEEN_WITHIN_MS = 15_000;

const statusOf = (p: Pod) => p.status?.containerStatuses?.[0];
const running = (p: Pod) => p.status?.phase === "Running" && !!statusOf(p)?.state?.running;
const terminated = (p: Pod) => statusOf(p)?.state?.terminated;

/** A pod running `script`, with the host folder at /h. */
const manifest = (
  name: string,
  script: string,
  opts: { resources?: string; restartPolicy?: "Always" | "Never" } = {},
) => shellPodManifest(name, tb.busybox, script, { hostDir, restartPolicy: "Never", ...opts });

/** A pod whose container exits 7 once the host file /h/<name> exists. */
const waiter = (name: string) =>
  manifest(name, `while [ ! -e /h/${name} ]; do sleep 0.05; done; exit 7`);

async function metric(name: string): Promise<number> {
  const text = await (await agent.request("/metrics")).text();
  return Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1] ?? Number.NaN);
}

beforeAll(async () => {
  await agent.start();
}, 60_000);

afterAll(async () => {
  await agent.cleanup();
  rmSync(hostDir, { recursive: true, force: true });
}, 120_000);

describe("container exits seen through the runtime's events (needs root and the test bed)", () => {
  test("an exit, an OOM kill and a crash show in the API within seconds though the relist runs every 60 s", async () => {
    agent.writeManifest("exits.yaml", waiter("exits"));
    const hog = "x=a; while true; do x=$x$x; done";
    agent.writeManifest(
      "oom.yaml",
      manifest("oom", `while [ ! -e /h/oom ]; do sleep 0.05; done; ${hog}`, {
        resources: "{ limits: { memory: 32Mi } }",
      }),
    );
    agent.writeManifest(
      "crash.yaml",
      manifest("crash", "while [ ! -e /h/crash ]; do sleep 0.05; done; rm /h/crash; exit 1", {
        restartPolicy: "Always",
      }),
    );
    for (const name of ["exits", "oom", "crash"]) await agent.waitPod(name, "Running", running);
    const relists = await metric("fleetlet_pleg_relists_total");
    for (const name of ["exits", "oom", "crash"]) writeFileSync(join(hostDir, name), "");
    const exited = await agent.waitPod(
      "exits",
      "terminated",
      (p) => !!terminated(p),
      SEEN_WITHIN_MS,
    );
    expect(terminated(exited)).toMatchObject({ exitCode: 7, reason: "Error" });
    expect(exited.status?.phase).toBe("Failed");
    const oom = await agent.waitPod("oom", "OOM-killed", (p) => !!terminated(p), SEEN_WITHIN_MS);
    expect(terminated(oom)).toMatchObject({ exitCode: 137, reason: "OOMKilled" });
    const crashed = await agent.waitPod(
      "crash",
      "restarted",
      (p) => (statusOf(p)?.restartCount ?? 0) >= 1,
      SEEN_WITHIN_MS,
    );
    expect(statusOf(crashed)?.lastState?.terminated).toMatchObject({
      exitCode: 1,
      reason: "Error",
    });
    expect(await metric("fleetlet_pleg_event_relists_total")).toBeGreaterThanOrEqual(3);
    // the relists that saw them were the events' (a periodic one comes only every 60 s)
    expect(await metric("fleetlet_pleg_relists_total")).toBeGreaterThan(relists);
    for (const name of ["exits", "oom", "crash"]) agent.removeManifest(`${name}.yaml`);
  }, 90_000);

  test("containerd restarting while events flow: an exit in the gap and one after are seen, nothing else restarts", async () => {
    agent.writeManifest("keeps.yaml", sleeperManifest("keeps", tb.busybox));
    agent.writeManifest("gap.yaml", waiter("gap"));
    agent.writeManifest("after.yaml", waiter("after"));
    const before = await agent.waitPod("keeps", "Running", running);
    for (const name of ["gap", "after"]) await agent.waitPod(name, "Running", running);
    await stopContainerd(tb);
    try {
      writeFileSync(join(hostDir, "gap"), ""); // exits while containerd is down
      await Bun.sleep(500);
    } finally {
      startContainerd();
    }
    const gap = await agent.waitPod("gap", "terminated", (p) => !!terminated(p), SEEN_WITHIN_MS);
    expect(terminated(gap)).toMatchObject({ exitCode: 7 });
    // the stream is open again: the next exit comes through it
    await Bun.sleep(6000);
    writeFileSync(join(hostDir, "after"), "");
    const after = await agent.waitPod(
      "after",
      "terminated",
      (p) => !!terminated(p),
      SEEN_WITHIN_MS,
    );
    expect(terminated(after)).toMatchObject({ exitCode: 7 });
    const keeps = await agent.waitPod("keeps", "Running", running);
    expect(statusOf(keeps)?.containerID).toBe(statusOf(before)?.containerID);
    expect(statusOf(keeps)?.restartCount).toBe(0);
    expect(agent.proc?.exitCode ?? null).toBeNull();
  }, 120_000);
});
