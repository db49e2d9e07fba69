// Image pull settings end to end: the compiled agent against a containerd of its own (so that the
// test bed's filler images are absent and really pulled from its registry), pods written together.
// With registryPullQPS 1 and registryBurst 1 and pulls in parallel, pulls begun together beyond
// the one token are refused with the kubelet's "pull QPS exceeded" and pull after back-off; with
// the default serialized pulls, four pulls wait for each other and their Pulled events say so.
// Needs root and the test bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Event, Pod } from "../../src/api/types.ts";
import { createCriClient } from "../../src/cri/index.ts";
import { TestAgent } from "../lib/agent.ts";
import { sleeperManifest } from "../lib/manifests.ts";
import { SmallContainerd } from "../lib/small-containerd.ts";
import { eventually } from "../lib/testbed.ts";

const small = new SmallContainerd(256);
const agent = new TestAgent({ endpoint: small.endpoint });
const cri = createCriClient({ endpoint: small.endpoint });
const tb = agent.tb;

async function podEvents(name: string): Promise<Event[]> {
  const sel = encodeURIComponent(`involvedObject.name=${name}-${agent.nodeName}`);
  const res = await agent.request(`/api/v1/namespaces/default/events?fieldSelector=${sel}`);
  return ((await res.json()) as { items: Event[] }).items;
}

const running = (seen: Pod[]) => seen.at(-1)?.status?.phase === "Running";
const waitingStates = (seen: Pod[]) =>
  seen.flatMap((p) => p.status?.containerStatuses?.[0]?.state.waiting ?? []);

/** Pods (name → image) in one manifest file, watched from before they exist until they run. */
async function runAll(file: string, pods: [string, string][]) {
  const watches = pods.map(([n]) => agent.watchPod(n, "running", running, 60_000));
  agent.writeManifest(file, pods.map(([n, image]) => sleeperManifest(n, image)).join("\n---\n"));
  return Promise.all(watches);
}

/** Removes the pods of `file` and waits until they are gone. */
async function removeAll(file: string, names: string[]) {
  agent.removeManifest(file);
  for (const n of names)
    await eventually(`pod ${n} to be gone`, async () => (await agent.pod(n)) === undefined);
}

/** "Successfully pulled image "x" in 1.2s (1.5s including waiting). ..." → [pull, total] ms. */
function pulledTimes(message: string): [number, number] {
  const m = / in ([0-9.hms]+) \(([0-9.hms]+) including waiting\)\. Image size: \d+ bytes\.$/.exec(
    message,
  );
  if (!m) throw new Error(`not a Pulled message: ${message}`);
  return [goDurationMs(m[1] ?? ""), goDurationMs(m[2] ?? "")];
}

function goDurationMs(text: string): number {
  let ms = 0;
  for (const [, n, unit] of text.matchAll(/([0-9.]+)(ms|h|m|s)/g)) {
    ms += Number(n) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[unit as "ms" | "s" | "m" | "h"];
  }
  return ms;
}

beforeAll(() => small.start(), 30_000);
afterAll(async () => {
  await agent.cleanup();
  cri.close();
  await small.stop();
}, 60_000);

describe("image pull settings against a private containerd (needs root and the test bed)", () => {
  test("registryPullQPS 1, registryBurst 1: of four pulls begun together, those past the one token are refused with 'pull QPS exceeded', then pull after their back-off", async () => {
    agent.args = ["--serialize-image-pulls=false", "--registry-qps", "1", "--registry-burst", "1"];
    await agent.start();
    const sizes = ["8m", "16m", "24m", "32m"] as const;
    const pods = sizes.map((s): [string, string] => [`q${s}`, tb.filler[s]]);
    try {
      const seen = await runAll("qps.yaml", pods);
      const qpsFailed = (image: string) => `Failed to pull image "${image}": pull QPS exceeded`;
      const events = await Promise.all(pods.map(([name]) => podEvents(name)));
      // A refused pull's Failed event is the record of it. (Events are listed in the order they
      // were last seen, so a pod refused twice has "Error: ImagePullBackOff" before it.)
      const refused = pods.filter(([, image], i) =>
        (events[i] ?? []).some((e) => e.reason === "Failed" && e.message === qpsFailed(image)),
      );
      // Four pulls asked for within a second or so of each other: one token, one more a second.
      expect(refused.length).toBeGreaterThanOrEqual(1);
      expect(refused.length).toBeLessThanOrEqual(3);
      for (const [name] of refused) {
        const i = pods.findIndex(([n]) => n === name);
        expect(
          waitingStates(seen[i] ?? []).some(
            (w) => w.reason === "ErrImagePull" && w.message === "pull QPS exceeded",
          ),
        ).toBe(true);
        expect((events[i] ?? []).map((e) => e.reason)).toContain("Pulled");
      }
      await removeAll(
        "qps.yaml",
        pods.map(([n]) => n),
      );
    } finally {
      await agent.stop();
    }
    // Absent again for the next test.
    for (const [, ref] of pods) await cri.removeImage({ image: { image: ref } });
  }, 90_000);

  test("serializeImagePulls (the default): pulls asked for together wait for each other, and their Pulled events count the wait", async () => {
    agent.args = [];
    await agent.start();
    const names = ["s8", "s16", "s24", "s32"];
    const sizes = ["8m", "16m", "24m", "32m"] as const;
    await runAll(
      "serial.yaml",
      names.map((n, i) => [n, tb.filler[sizes[i] ?? "8m"]]),
    );
    const pulled = await Promise.all(
      names.map((n) =>
        eventually(`pod ${n}'s Pulled event`, async () =>
          (await podEvents(n)).find((e) => e.reason === "Pulled"),
        ),
      ),
    );
    const times = pulled.map((e) => pulledTimes(e.message ?? ""));
    const pulls = times.map(([pull]) => pull);
    const waits = times.map(([pull, total]) => total - pull);
    // In parallel every wait would be under 2 ms (a pull begins in the turn it is asked for).
    // Serialized, four pods asked for within about a sandbox's start of each other: some wait,
    // and none longer than all the other pulls together (plus a ms of rounding each).
    expect(Math.max(...waits)).toBeGreaterThan(20);
    for (const [i, wait] of waits.entries()) {
      const others = pulls.reduce((sum, p, j) => (j === i ? sum : sum + p), 0);
      expect(wait).toBeLessThanOrEqual(others + 5);
    }
    await removeAll("serial.yaml", names);
  }, 90_000);
});
