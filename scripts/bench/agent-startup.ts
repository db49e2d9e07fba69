// How long the agent takes from a manifest written to the pod Running in its local API, against
// the raw CRI calls for the same work (RunPodSandbox + CreateContainer + StartContainer through
// createCriClient) measured in the same run; the difference is the agent's overhead per pod.
//
//   node_modules/.bin/bun scripts/bench/agent-startup.ts [--rounds N] [--batch M]
//       [--relist-period 100ms]        (defaults 15, 30, 100ms; needs root and the test bed)
//
// Single pods: N rounds, each writes one manifest and waits for Running (polled every 5 ms),
// then makes the same pod through raw CRI; overhead = agent - raw per round. Batch: M manifests
// written at once against M raw pods made concurrently; overhead per pod = the k-th agent
// latency - the k-th raw latency (both sorted). Host-network busybox pods, image pre-pulled. The
// raw pods go into the same cgroup hierarchy as the agent's (kubepods/besteffort/pod<uid> under
// /fleetlet-bench-<run id>), since runc's cgroup setup there is part of the same work.
// Everything it creates is removed at the end (the agent's pods, raw sandboxes labelled
// io.fleetlet.bench-run=<run id>, their cgroups, temp dirs), also on error.
import { rmSync } from "node:fs";
import { createCriClient } from "../../src/cri/index.ts";
import { TestAgent } from "../../test/lib/agent.ts";
import { removeCgroupRoot } from "../../test/lib/cgroups.ts";
import {
  benchOptions,
  ms,
  quantile,
  rawLogRoot,
  rawPod,
  removeRawPods,
  sleeperManifest,
} from "./agent-common.ts";

const opts = benchOptions("agent-startup", { rounds: 15, batch: 30, "relist-period": "100ms" });
const runId = `startup-${Date.now().toString(36)}`;
/** The raw pods' cgroups: the same hierarchy as the agent's pods (kubepods/besteffort/pod<uid>). */
const rawCgroupRoot = `/fleetlet-bench-${runId}`;
const agent = new TestAgent({ args: ["--pleg-relist-period", opts["relist-period"]] });
const cri = createCriClient({ endpoint: agent.tb.endpoint });
const image = agent.tb.busybox;

const isRunning = (p: {
  status?: { phase?: string; containerStatuses?: { state?: { running?: unknown } }[] };
}) =>
  p.status?.phase === "Running" && p.status.containerStatuses?.[0]?.state?.running !== undefined;

interface AgentTiming {
  /** Manifest written → pod Running in the local API (ms). */
  latency: number;
  /** The agent's own time outside containerd: write → RunPodSandbox began, plus container
   * started → Running seen (ms, from containerd's timestamps). */
  outside: number;
}

/** Writes the manifests at once; resolves with each pod's timings. */
async function agentPods(names: string[]): Promise<AgentTiming[]> {
  const wall0 = Date.now();
  const t0 = performance.now();
  for (const n of names) agent.writeManifest(`${n}.yaml`, sleeperManifest(n, image));
  const done = new Map<string, { latency: number; wall: number; uid: string }>();
  const want = new Set(names.map((n) => `${n}-${agent.nodeName}`));
  while (done.size < names.length) {
    if (performance.now() - t0 > 120_000) {
      throw new Error(`pods not Running after 120 s: ${names.length - done.size} left`);
    }
    for (const p of await agent.pods()) {
      if (want.has(p.metadata.name) && !done.has(p.metadata.name) && isRunning(p)) {
        const latency = performance.now() - t0;
        done.set(p.metadata.name, { latency, wall: wall0 + latency, uid: p.metadata.uid ?? "" });
      }
    }
    await Bun.sleep(names.length > 1 ? 10 : 3);
  }
  for (const n of names) agent.removeManifest(`${n}.yaml`);
  return Promise.all(
    [...done.values()].map(async (d) => ({
      latency: d.latency,
      outside: await outsideContainerd(d.uid, wall0, d.wall),
    })),
  );
}

async function outsideContainerd(uid: string, wrote: number, seen: number): Promise<number> {
  const selector = { labelSelector: { "io.kubernetes.pod.uid": uid } };
  const sb = (await cri.listPodSandbox({ filter: selector })).items[0];
  const c = (await cri.listContainers({ filter: selector })).containers[0];
  if (sb === undefined || c === undefined) return Number.NaN;
  const started = (await cri.containerStatus({ containerId: c.id })).status?.startedAt ?? 0;
  return sb.createdAt / 1e6 - wrote + (seen - started / 1e6);
}

async function rawPods(names: string[]): Promise<number[]> {
  const t0 = performance.now();
  return Promise.all(
    names.map(async (n) => {
      await rawPod(cri, runId, n, image, rawCgroupRoot);
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
  const outside = agentMs.map((a) => a.outside);
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
    `  agent outside containerd: p50 ${ms(quantile(outside, 0.5))}  p99 ${ms(quantile(outside, 0.99))}  (write -> RunPodSandbox began, + started -> Running seen)`,
  );
  console.log(
    `  targets p50 <= 100 ms: ${p50 <= 100 ? "yes" : "no"}, p99 <= 300 ms: ${p99 <= 300 ? "yes" : "no"}`,
  );
}

async function main() {
  await cri.pullImage({ image: { image } });
  await agent.start();
  console.log(
    `agent-startup: relist period ${opts["relist-period"]}, ${opts.rounds} single rounds, batch ${opts.batch}`,
  );
  await agentPods(["warm"]);
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
  const names = Array.from({ length: opts.batch }, (_, i) => `b${i}`);
  const batchAgent = (await agentPods(names)).sort((a, b) => a.latency - b.latency);
  await settle();
  const batchRaw = (await rawPods(names)).sort((a, b) => a - b);
  await settle();
  report(
    `${opts.batch} pods at once`,
    batchAgent,
    batchRaw,
    batchAgent.map((a, k) => a.latency - (batchRaw[k] as number)),
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
