// Pulls over a slow, unreliable link, end to end: the compiled agent against a containerd of its
// own (so the filler images are absent and really pulled), the test registry behind a throttling
// proxy on loopback (2 MiB/s) that can hold everything back or cut every connection. Shows that
// a pulling container's waiting message carries the pull's growing figures, that a stalled pull
// is cancelled after imagePullProgressDeadline (3 s here) and tried again, and what a pull cut by
// a dropped link is continued from what containerd had written when it is tried again (the
// agent pulls under a lease of its own). Needs root and the test bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { ContainerState, Pod } from "../../src/api/types.ts";
import { createContainerdClient } from "../../src/cri/containerd.ts";
import { createCriClient } from "../../src/cri/index.ts";
import { TestAgent } from "../lib/agent.ts";
import { sleeperManifest } from "../lib/manifests.ts";
import { SmallContainerd } from "../lib/small-containerd.ts";
import { eventually } from "../lib/testbed.ts";
import { ThrottleProxy } from "../lib/throttle-proxy.ts";

const MiB = 1024 * 1024;
const RATE = 2 * MiB;
const DEADLINE_S = 3;
const small = new SmallContainerd(512);
const agent = new TestAgent({
  endpoint: small.endpoint,
  args: ["--image-pull-progress-deadline", `${DEADLINE_S}s`],
});
const cri = createCriClient({ endpoint: small.endpoint });
const containerd = createContainerdClient({ endpoint: small.endpoint });
const [registryHost = "", registryPort = ""] = agent.tb.registry.split(":");
const proxy = new ThrottleProxy({
  target: { hostname: registryHost, port: Number(registryPort) },
  bytesPerSecond: RATE,
});
/** A filler image of the test registry, pulled through the proxy. */
const throughProxy = (size: "16m" | "24m" | "32m") =>
  agent.tb.filler[size].replace(agent.tb.registry, proxy.host);

const PULLING = /^Pulling image "[^"]+": ([0-9.]+) (B|KiB|MiB) of ([0-9.]+) MiB$/;

/** The bytes written that a waiting message of a running pull says (undefined: not one). */
function pulledBytes(waiting: ContainerState["waiting"]): number | undefined {
  const m = PULLING.exec(waiting?.message ?? "");
  if (!m || waiting?.reason !== "ContainerCreating") return undefined;
  return Number(m[1]) * { B: 1, KiB: 1024, MiB }[m[2] as "B" | "KiB" | "MiB"];
}

const waitingOf = (pod: Pod | undefined) => pod?.status?.containerStatuses?.[0]?.state.waiting;
const running = (pod: Pod | undefined) => pod?.status?.phase === "Running";

/** Starts the pod `name` pulling `image`; resolves once its message says `atLeast` bytes. */
async function pullUntil(name: string, image: string, atLeast: number): Promise<void> {
  const watch = agent.watchPod(name, `to have pulled ${atLeast} bytes`, (seen) => {
    const bytes = pulledBytes(waitingOf(seen.at(-1)));
    return bytes !== undefined && bytes >= atLeast;
  });
  agent.writeManifest(`${name}.yaml`, sleeperManifest(name, image));
  await watch;
}

/** The agent's pull leases in the private containerd (ctr from containerd's package). */
function pullLeases(): string[] {
  const ls = Bun.spawnSync(["ctr", "-a", small.socket, "-n", "k8s.io", "leases", "ls", "-q"]);
  if (ls.exitCode !== 0) throw new Error(`ctr leases ls failed: ${ls.stderr.toString()}`);
  return ls.stdout
    .toString()
    .split("\n")
    .filter((id) => id.startsWith("fleetlet-pull-"));
}

async function remove(name: string, image: string): Promise<void> {
  agent.removeManifest(`${name}.yaml`);
  await eventually(`pod ${name} to be gone`, async () => (await agent.pod(name)) === undefined);
  await cri.removeImage({ image: { image } });
}

beforeAll(async () => {
  await small.start();
  proxy.start();
  await agent.start();
}, 60_000);
afterAll(async () => {
  await agent.cleanup();
  cri.close();
  containerd.close();
  proxy.stop();
  await small.stop();
}, 60_000);

describe("pulls over a slow link (needs root and the test bed)", () => {
  test("a pulling container waits in ContainerCreating with the pull's growing figures, shown by describe pod, until it runs", async () => {
    const image = throughProxy("24m");
    const name = "progress";
    const watch = agent.watchPod(name, "running", (seen) => running(seen.at(-1)), 60_000);
    agent.writeManifest(`${name}.yaml`, sleeperManifest(name, image));
    await agent.waitPod(name, "pulling", (p) => (pulledBytes(waitingOf(p)) ?? 0) > 0);
    // (Run while the pull goes on; it holds this process, and so the proxy, for a moment.)
    const described = agent.cli(["describe", "pod", `${name}-${agent.nodeName}`]).stdout;
    expect(described).toMatch(
      /^ {4}State:\s+Waiting\n {6}Reason:\s+ContainerCreating\n {6}Message:\s+Pulling image "[^"]+": [0-9.]+ (B|KiB|MiB) of 25\.0 MiB$/m,
    );
    const seen = await watch;
    const figures = seen.flatMap((p) => pulledBytes(waitingOf(p)) ?? []);
    // Figures every few seconds over a pull of ~12 s at 2 MiB/s; they only grow.
    expect(new Set(figures).size).toBeGreaterThanOrEqual(2);
    expect(figures).toEqual([...figures].sort((a, b) => a - b));
    expect(Math.max(...figures)).toBeLessThan(25 * MiB);
    console.log(`progress: ${figures.length} figures seen, ${new Set(figures).size} distinct`);
    await remove(name, image);
  }, 90_000);

  test("a pull that writes no byte for imagePullProgressDeadline is cancelled with ErrImagePull saying so, and pulled again after its back-off", async () => {
    const image = throughProxy("16m");
    const name = "stall";
    await pullUntil(name, image, 4 * MiB);
    proxy.stall();
    const stalledAt = performance.now();
    const failed = await agent.watchPod(
      name,
      "to fail its pull",
      (seen) => waitingOf(seen.at(-1))?.reason === "ErrImagePull",
    );
    const noticedMs = performance.now() - stalledAt;
    expect(waitingOf(failed.at(-1))?.message).toMatch(
      /^pull cancelled: no byte written for 3s \(imagePullProgressDeadline\); [0-9.]+ MiB of 17\.0 MiB written$/,
    );
    console.log(`stall: noticed ${Math.round(noticedMs)} ms after the link stalled`);
    proxy.resume();
    await agent.waitPod(name, "running", running, 60_000);
    const reasons = (await agent.events())
      .filter((e) => e.involvedObject.name === `${name}-${agent.nodeName}`)
      .map((e) => e.reason);
    expect(reasons).toContain("Failed");
    expect(reasons).toContain("Pulled");
    await remove(name, image);
  }, 90_000);
});

describe("a pull cut by a dropped link (needs root and the test bed)", () => {
  test("fails with ErrImagePull and is pulled again, continuing from what containerd had written: the retry is served only the rest", async () => {
    const image = throughProxy("32m");
    const name = "cut";
    const before = proxy.bytesServed;
    await pullUntil(name, image, 8 * MiB);
    const watch = agent.watchPod(name, "running", (seen) => running(seen.at(-1)), 90_000);
    // What containerd has written of the image's blobs just before the link drops.
    const had = (await containerd.content.listStatuses([])).reduce((n, i) => n + i.offset, 0);
    const servedAtCut = proxy.bytesServed - before;
    expect(proxy.cutAll()).toBeGreaterThan(0);
    expect(pullLeases()).toHaveLength(1);
    const seen = await watch;
    expect(seen.some((p) => waitingOf(p)?.reason === "ErrImagePull")).toBe(true);
    const size = (await cri.imageStatus({ image: { image } })).image?.size ?? 0;
    const served = proxy.bytesServed - before;
    const retried = served - servedAtCut;
    console.log(`cut: ${JSON.stringify({ size, had, servedAtCut, retried, served })}`);
    expect(had).toBeGreaterThan(8 * MiB);
    // The rest of the blobs, and the manifest and config again.
    expect(retried).toBeLessThan(size - had + 256 * 1024);
    expect(served).toBeLessThan(size * 1.1);
    // The pull's lease is gone with its success: the image holds its content now.
    expect(pullLeases()).toEqual([]);
    await remove(name, image);
  }, 120_000);
});
