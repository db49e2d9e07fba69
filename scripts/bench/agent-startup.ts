// How long the agent takes from a manifest written to the pod Running in its local API, against
// the raw CRI calls for the same work (RunPodSandbox + CreateContainer + StartContainer through
// createCriClient) measured in the same run; the difference is the agent's overhead per pod.
//
//   node_modules/.bin/bun scripts/bench/agent-startup.ts [--rounds N] [--batch M]
//       [--batch-rounds K] [--relist-period 1s]
//       (defaults 15, 30, 3, 1s: the agent's own relist period; needs root and the test bed)
//
// Single pods: N rounds, each writes one manifest and waits for Running (polled every 3 ms), and
// makes the same pod through raw CRI; overhead = agent - raw per round. Batch: K rounds, each
// writes M manifests at once and makes M raw pods concurrently; overhead per pod = the k-th
// agent latency - the k-th raw latency (both sorted), pooled over the rounds. Both kinds of
// round alternate which side goes first, so that machine noise falls on both alike.
// Host-network busybox pods, image pre-pulled. The raw pods go into the same cgroup hierarchy as
// the agent's (kubepods/besteffort/pod<uid> under /fleetlet-bench-<run id>), since runc's cgroup
// setup there is part of the same work.
//
// The agent's own time is read from its debug log of CRI calls (each line gives the call's end
// and duration): write -> RunPodSandbox sent, plus StartContainer answered -> Running seen (the
// k-th of each, sorted, in a batch).
//
// Everything it creates is removed at the end (the agent's pods, raw sandboxes labelled
// io.fleetlet.bench-run=<run id>, their cgroups, temp dirs), also on error.
import { rmSync } from "node:fs";
import { createCriClient } from "../../src/cri/index.ts";
import { TestAgent } from "../../test/lib/agent.ts";
import { removeCgroupRoot } from "../../test/lib/cgroups.ts";
import {
  agentConfigs,
  benchOptions,
  type ConfigTemplate,
  ms,
  quantile,
  rawLogRoot,
  rawPod,
  rawPodFiles,
  removeRawPods,
  sleeperManifest,
} from "./agent-common.ts";

const opts = benchOptions("agent-startup", {
  rounds: 15,
  batch: 30,
  "batch-rounds": 3,
  "relist-period": "1s",
});
const runId = `startup-${Date.now().toString(36)}`;
/** The raw pods' cgroups: the same hierarchy as the agent's pods (kubepods/besteffort/pod<uid>). */
const rawCgroupRoot = `/fleetlet-bench-${runId}`;
const agent = new TestAgent({
  args: ["--pleg-relist-period", opts["relist-period"], "--log-level", "debug"],
});
const cri = createCriClient({ endpoint: agent.tb.endpoint });
const image = agent.tb.busybox;

const isRunning = (p: {
  status?: { phase?: string; containerStatuses?: { state?: { running?: unknown } }[] };
}) =>
  p.status?.phase === "Running" && p.status.containerStatuses?.[0]?.state?.running !== undefined;

interface AgentTiming {
  /** Manifest written → pod Running in the local API (ms). */
  latency: number;
  /** The agent's own time: write → RunPodSandbox sent, plus StartContainer answered → Running
   * seen (ms). */
  own: number;
}

/** Start and end (epoch ms) of each CRI call of `method` the agent logged in `text`. */
function loggedCalls(text: string, method: string): { start: number; end: number }[] {
  const calls: { start: number; end: number }[] = [];
  const re = new RegExp(`^(\\S+) DEBUG CRI call .*\\bmethod=${method} ms=([\\d.]+)`, "gm");
  for (const m of text.matchAll(re)) {
    const end = Date.parse(m[1] as string);
    calls.push({ start: end - Number(m[2]), end });
  }
  return calls;
}

/** Writes the manifests at once; resolves with each pod's timings, sorted by latency. */
async function agentPods(
  names: string[],
  beforeRemoval?: () => Promise<void>,
): Promise<AgentTiming[]> {
  const logFrom = agent.output.length;
  const wall0 = Date.now();
  const t0 = performance.now();
  for (const n of names) agent.writeManifest(`${n}.yaml`, sleeperManifest(n, image));
  const seen: number[] = []; // epoch ms at which each pod was seen Running
  const want = new Set(names.map((n) => `${n}-${agent.nodeName}`));
  const done = new Set<string>();
  while (done.size < names.length) {
    if (performance.now() - t0 > 120_000) {
      throw new Error(`pods not Running after 120 s: ${names.length - done.size} left`);
    }
    for (const p of await agent.pods()) {
      if (want.has(p.metadata.name) && !done.has(p.metadata.name) && isRunning(p)) {
        done.add(p.metadata.name);
        seen.push(wall0 + (performance.now() - t0));
      }
    }
    await Bun.sleep(names.length > 1 ? 10 : 3);
  }
  const log = agent.output.slice(logFrom);
  await beforeRemoval?.();
  for (const n of names) agent.removeManifest(`${n}.yaml`);
  const sent = loggedCalls(log, "runPodSandbox").map((c) => c.start);
  const started = loggedCalls(log, "startContainer").map((c) => c.end);
  if (sent.length < names.length || started.length < names.length) {
    throw new Error("the agent's debug log lacks some RunPodSandbox or StartContainer calls");
  }
  const byTime = (a: number, b: number) => a - b;
  for (const xs of [seen, sent, started]) xs.sort(byTime);
  return seen.map((at, k) => ({
    latency: at - wall0,
    own: (sent[k] as number) - wall0 + (at - (started[k] as number)),
  }));
}

/** The agent's configs for a sleeper, read back from containerd once its warm-up pod runs. */
let template: ConfigTemplate | undefined;

async function captureTemplate(): Promise<ConfigTemplate> {
  const { containers } = await cri.listContainers({
    filter: { labelSelector: { "io.kubernetes.pod.name": `warm-${agent.nodeName}` } },
  });
  const listed = containers[0];
  if (listed === undefined) throw new Error("the warm-up pod's container is not listed");
  return agentConfigs(cri, listed);
}

async function rawPods(names: string[]): Promise<number[]> {
  if (template === undefined) throw new Error("no config template yet");
  for (const n of names) rawPodFiles(runId, n, template);
  const t0 = performance.now();
  return Promise.all(
    names.map(async (n) => {
      await rawPod(cri, runId, n, image, rawCgroupRoot, template);
      return performance.now() - t0;
    }),
  );
}

/** Waits until the agent has removed every pod (so rounds do not overlap). */
async function settle(): Promise<void> {
  for (let i = 0; i < 600 && (await agent.pods()).length > 0; i++) await Bun.sleep(50);
  await removeRawPods(cri, runId);
}

function report(title: string, agentMs: AgentTiming[], rawMs: number[], overhead: number[]) {
  const lat = agentMs.map((a) => a.latency);
  const own = agentMs.map((a) => a.own);
  console.log(`${title}:`);
  console.log(
    `  agent (write -> Running): p50 ${ms(quantile(lat, 0.5))}  p99 ${ms(quantile(lat, 0.99))}`,
  );
  console.log(
    `  raw CRI (3 calls):        p50 ${ms(quantile(rawMs, 0.5))}  p99 ${ms(quantile(rawMs, 0.99))}`,
  );
  const p50 = quantile(overhead, 0.5);
  const p99 = quantile(overhead, 0.99);
  console.log(`  overhead per pod:         p50 ${ms(p50)}  p99 ${ms(p99)}`);
  console.log(
    `  agent's own time:         p50 ${ms(quantile(own, 0.5))}  p99 ${ms(quantile(own, 0.99))}  (write -> RunPodSandbox sent, + StartContainer answered -> Running seen)`,
  );
  console.log(
    `  targets p50 <= 100 ms: ${p50 <= 100 ? "yes" : "no"}, p99 <= 300 ms: ${p99 <= 300 ? "yes" : "no"}`,
  );
}

async function main() {
  await cri.pullImage({ image: { image } });
  await agent.start();
  console.log(
    `agent-startup: relist period ${opts["relist-period"]}, ${opts.rounds} single rounds, ${opts["batch-rounds"]} rounds of ${opts.batch} pods at once`,
  );
  await agentPods(["warm"], async () => {
    template = await captureTemplate();
  });
  await rawPods(["warm"]);
  await settle();
  const single = { agent: [] as AgentTiming[], raw: [] as number[], diff: [] as number[] };
  for (let i = 0; i < opts.rounds; i++) {
    // Alternate which goes first, so that machine noise falls on both alike.
    let a: AgentTiming | undefined;
    if (i % 2 === 0) [a] = await agentPods([`s${i}`]);
    const [r] = await rawPods([`s${i}`]);
    if (i % 2 === 1) [a] = await agentPods([`s${i}`]);
    await settle();
    if (a === undefined || r === undefined) throw new Error("a round produced no timing");
    single.agent.push(a);
    single.raw.push(r);
    single.diff.push(a.latency - r);
  }
  report("1 pod", single.agent, single.raw, single.diff);
  const batch = { agent: [] as AgentTiming[], raw: [] as number[], diff: [] as number[] };
  for (let i = 0; i < opts["batch-rounds"]; i++) {
    const names = Array.from({ length: opts.batch }, (_, k) => `b${i}x${k}`);
    let a: AgentTiming[] = [];
    let r: number[] = [];
    if (i % 2 === 0) a = await agentPods(names);
    await settle();
    r = (await rawPods(names)).sort((x, y) => x - y);
    await settle();
    if (i % 2 === 1) {
      a = await agentPods(names);
      await settle();
    }
    batch.agent.push(...a);
    batch.raw.push(...r);
    batch.diff.push(...a.map((t, k) => t.latency - (r[k] as number)));
  }
  report(
    `${opts.batch} pods at once (${opts["batch-rounds"]} rounds)`,
    batch.agent,
    batch.raw,
    batch.diff,
  );
}

try {
  await main();
} finally {
  await agent.cleanup().catch((e) => console.error(`cleanup of the agent failed: ${e}`));
  await removeRawPods(cri, runId).catch((e) => console.error(`cleanup of raw pods failed: ${e}`));
  rmSync(rawLogRoot(runId), { recursive: true, force: true });
  await removeCgroupRoot(rawCgroupRoot).catch((e) =>
    console.error(`cleanup of cgroups failed: ${e}`),
  );
  cri.close();
}
