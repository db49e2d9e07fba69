// How long the agent takes from a manifest written to the pod Running in its local API, against
// the raw CRI calls for the same work (RunPodSandbox + CreateContainer + StartContainer through
// createCriClient) measured in the same run; the difference is the agent's overhead per pod.
//
//   node_modules/.bin/bun scripts/bench/agent-startup.ts [--rounds N] [--batch M]
//       [--batch-rounds K] [--relist-period 1s] [--own-time off|log] [--calibrate no|yes]
//       [--starts S] [--scratch-fs ext4|tmp]
//       (defaults 15, 30, 10, 1s: the agent's own relist period, off, no, the agent's
//       default maxParallelStarts (CPUs, at least 2), ext4; needs root and the test bed)
//
// Single pods: N rounds, each writes one manifest and waits for Running (seen through a pod watch
// on the API, GET /api/v1/pods?watch=true, so that watching costs the agent little), and
// makes the same pod through raw CRI; overhead = agent - raw per round, the two sides taking
// turns to go first so that machine noise falls on both alike.
//
// Batch: K rounds, each writes M manifests at once, and makes M raw pods before or after (the two
// taking turns to go first). The agent runs with --max-parallel-starts S, and the raw pods make
// their start calls the same way: at most S at once, a freed slot going to the pod whose name
// sorts first (S = 0: all at once on both sides). Overhead per pod = the k-th agent latency -
// the k-th raw latency (both sorted), pooled over the rounds; and, less moved by a round the
// runtime ran slower or faster as a whole, the median over the rounds of each rank k. Each round prints the CPU the
// agent, containerd and the whole machine spent on each side.
// --calibrate yes puts raw pods in the agent's place: the overhead it prints is the noise floor
// of the design (raw against raw). Here a 30-pod burst takes ~17-20 CPU-s of a saturated 2-core
// machine. All at once (S = 0), every pod ends near the end of the burst, and one burst's length
// differs from the next by up to a second or so, which swamps the overhead; a few at a time,
// the k-th pod ends at about k/M of the burst, and the rounds agree far better.
// (Both sides at the same moment is no better: whichever side's calls reach containerd first
// is served first, and the k-th pods then differ by seconds.)
// Before every round, the last round's pods are gone from containerd, a second has passed, the
// page cache is dropped (see releaseDyingCgroups) and containerd is quiet (see quietRuntime).
// One batch round of each side runs first, not counted: the agent's first burst of many pods
// runs code its single pods did not, not yet compiled.
// The agent's folders and the raw pods' files are on a fresh journaled ext4 (see
// scratchFilesystem; --scratch-fs tmp: the system's temp folder).
// Host-network busybox pods, image pre-pulled. The raw pods go into the same cgroup hierarchy as
// the agent's (kubepods/besteffort/pod<uid> under /fleetlet-bench-<run id>), since runc's cgroup
// setup there is part of the same work.
//
// The agent runs at its default log level and timings (but the relist period, which is an
// option). With --own-time log it logs every CRI call (which costs it CPU in a burst: about a
// sixth of its main thread's samples in a profile), and the bench prints its own time from that
// log: write -> RunPodSandbox sent, plus StartContainer answered -> Running seen (the k-th of
// each, sorted, in a batch).
//
// Everything it creates is removed at the end (the agent's pods, raw sandboxes labelled
// io.fleetlet.bench-run=<run id>, their cgroups, temp dirs), also on error.
import { readFileSync, rmSync } from "node:fs";
import { availableParallelism } from "node:os";
import type { Pod } from "../../src/api/types.ts";
import { watchEvents } from "../../src/cli/client.ts";
import { createCriClient } from "../../src/cri/index.ts";
import { TestAgent } from "../../test/lib/agent.ts";
import { removeCgroupRoot } from "../../test/lib/cgroups.ts";
import {
  agentConfigs,
  benchOptions,
  type ConfigTemplate,
  cpuTicks,
  machineShare,
  machineTicks,
  ms,
  quantile,
  quietRuntime,
  rawLogRoot,
  rawPod,
  rawPodFiles,
  releaseDyingCgroups,
  removeRawPods,
  scratchFilesystem,
  sleeperManifest,
  startQueue,
} from "./agent-common.ts";

const opts = benchOptions(
  "agent-startup",
  {
    rounds: 15,
    batch: 30,
    "batch-rounds": 10,
    "own-time": "off",
    "relist-period": "1s",
    calibrate: "no",
    starts: Math.max(2, availableParallelism()),
    "scratch-fs": "ext4",
  },
  ["starts"],
);
const runId = `startup-${Date.now().toString(36)}`;
const removeScratch = scratchFilesystem(runId, opts["scratch-fs"]);
/** The raw pods' cgroups: the same hierarchy as the agent's pods (kubepods/besteffort/pod<uid>). */
const rawCgroupRoot = `/fleetlet-bench-${runId}`;
for (const [name, allowed] of [
  ["own-time", ["off", "log"]],
  ["calibrate", ["no", "yes"]],
] as const) {
  if (!(allowed as readonly string[]).includes(opts[name])) {
    console.error(`agent-startup: --${name} must be ${allowed.map((a) => `"${a}"`).join(" or ")}`);
    process.exit(2);
  }
}
/** Raw pods in the agent's place: the design's noise floor. */
const calibrate = opts.calibrate === "yes";
/** Whether the agent logs its CRI calls, for its own time (which costs it CPU). */
const logCalls = opts["own-time"] === "log";
// The agent's default timings, not the e2e tests' fast ones (a folder relist every 2 s,
// housekeeping every second): the agent as it ships does that work less often.
const agent = new TestAgent({
  args: [
    "--pleg-relist-period",
    opts["relist-period"],
    "--file-check-frequency",
    "20s",
    "--housekeeping-interval",
    "2s",
    "--sync-frequency",
    "60s",
    "--max-parallel-starts",
    String(opts.starts),
    ...(logCalls ? ["--log-level", "debug"] : []),
  ],
});
const cri = createCriClient({ endpoint: agent.tb.endpoint });
const containerdPid = Number(readFileSync(agent.tb.containerdPidFile, "utf8").trim());
/** The CPU containerd spent between two readings of cpuTicks (ms). */
const containerdMs = (t0: number) => `containerd CPU ${(cpuTicks(containerdPid) - t0) * 10} ms`;
const image = agent.tb.busybox;

const isRunning = (p: Pod) =>
  p.status?.phase === "Running" && p.status.containerStatuses?.[0]?.state?.running !== undefined;

interface AgentTiming {
  /** Manifest written → pod Running in the local API (ms). */
  latency: number;
  /** With --own-time log: the agent's own time, write → RunPodSandbox sent, plus
   * StartContainer answered → Running seen (ms). */
  own?: number;
  /** Its first part: write → RunPodSandbox sent (ms). */
  toSandbox?: number;
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

/**
 * A pod watch on the agent's API (GET /api/v1/pods?watch=true), open once this resolves: the
 * server subscribes before it answers. `onPod` gets each event's pod as it arrives; `ended`
 * settles when the stream ends (or `signal` ends it).
 */
async function openWatch(
  onPod: (pod: Pod) => void,
  signal: AbortSignal,
): Promise<{ ended: Promise<void> }> {
  const res = await agent.request("/api/v1/pods?watch=true", { signal });
  if (!res.ok || res.body === null) throw new Error(`the pod watch answered ${res.status}`);
  const body = res.body;
  const ended = (async () => {
    for await (const event of watchEvents(body, signal)) onPod(event.object);
  })();
  return { ended };
}

/** Writes the manifests at once; resolves with each pod's timings, sorted by latency. */
async function agentPods(
  names: string[],
  beforeRemoval?: () => Promise<void>,
): Promise<AgentTiming[]> {
  const logFrom = agent.output.length;
  const seen: number[] = []; // epoch ms at which each pod was seen Running
  const want = new Set(names.map((n) => `${n}-${agent.nodeName}`));
  const done = new Set<string>();
  const stop = new AbortController();
  let allRunning = () => {};
  const running = new Promise<void>((resolve) => {
    allRunning = resolve;
  });
  let wall0 = 0;
  let t0 = 0;
  const { ended } = await openWatch((p) => {
    if (want.has(p.metadata.name) && !done.has(p.metadata.name) && isRunning(p)) {
      done.add(p.metadata.name);
      seen.push(wall0 + (performance.now() - t0));
      if (done.size === names.length) allRunning();
    }
  }, stop.signal);
  wall0 = Date.now();
  t0 = performance.now();
  for (const n of names) agent.writeManifest(`${n}.yaml`, sleeperManifest(n, image));
  const timeout = setTimeout(() => stop.abort(), 120_000);
  await Promise.race([running, ended]);
  clearTimeout(timeout);
  stop.abort();
  await ended;
  if (done.size < names.length) {
    throw new Error(`pods not Running after 120 s: ${names.length - done.size} left`);
  }
  const log = agent.output.slice(logFrom);
  await beforeRemoval?.();
  for (const n of names) agent.removeManifest(`${n}.yaml`);
  const byTime = (a: number, b: number) => a - b;
  seen.sort(byTime);
  if (!logCalls) return seen.map((at) => ({ latency: at - wall0 }));
  const sent = loggedCalls(log, "runPodSandbox").map((c) => c.start);
  const started = loggedCalls(log, "startContainer").map((c) => c.end);
  if (sent.length < names.length || started.length < names.length) {
    throw new Error("the agent's debug log lacks some RunPodSandbox or StartContainer calls");
  }
  for (const xs of [sent, started]) xs.sort(byTime);
  return seen.map((at, k) => ({
    latency: at - wall0,
    own: (sent[k] as number) - wall0 + (at - (started[k] as number)),
    toSandbox: (sent[k] as number) - wall0,
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
  const queued = startQueue(cri, opts.starts);
  const t0 = performance.now();
  return Promise.all(
    names.map(async (n) => {
      await rawPod(queued(n), runId, n, image, rawCgroupRoot, template);
      return performance.now() - t0;
    }),
  );
}

/** The agent's side of a round: its pods' timings, or raw pods' when calibrating. */
async function agentSide(names: string[]): Promise<AgentTiming[]> {
  if (!calibrate) return agentPods(names);
  const latencies = await rawPods(names.map((n) => `${n}c`));
  return latencies.sort((x, y) => x - y).map((latency) => ({ latency }));
}

/** Sandboxes in containerd that belong to the agent's pods. */
async function agentSandboxes(): Promise<number> {
  const { items } = await cri.listPodSandbox({});
  return items.filter((sb) => sb.metadata?.name.endsWith(`-${agent.nodeName}`)).length;
}

/**
 * Waits until every pod of the last round is gone from containerd, then a quiet second, so that
 * rounds do not overlap. A pod leaves the agent's API once its containers are stopped, while the
 * agent still removes its containers, sandbox and cgroups; without waiting for that, the next
 * round would run against a runtime still busy removing up to 30 pods.
 */
async function settle(): Promise<void> {
  for (let i = 0; i < 600 && (await agent.pods()).length > 0; i++) await Bun.sleep(50);
  await removeRawPods(cri, runId);
  for (let i = 0; i < 600 && (await agentSandboxes()) > 0; i++) await Bun.sleep(50);
  await Bun.sleep(1000);
  releaseDyingCgroups();
  if (!(await quietRuntime(containerdPid))) console.log("  (containerd did not get quiet)");
}

function report(title: string, agentMs: AgentTiming[], rawMs: number[], overhead: number[]) {
  const lat = agentMs.map((a) => a.latency);
  const own = agentMs.flatMap((a) => (a.own === undefined ? [] : [a.own]));
  const toSandbox = agentMs.flatMap((a) => (a.toSandbox === undefined ? [] : [a.toSandbox]));
  const after = own.map((o, k) => o - (toSandbox[k] as number));
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
    `  targets p50 <= 100 ms: ${p50 <= 100 ? "yes" : "no"}, p99 <= 300 ms: ${p99 <= 300 ? "yes" : "no"}`,
  );
  if (own.length === 0) return;
  console.log(
    `  agent's own time:         p50 ${ms(quantile(own, 0.5))}  p99 ${ms(quantile(own, 0.99))}  (write -> RunPodSandbox sent, + StartContainer answered -> Running seen; with its debug log)`,
  );
  console.log(
    `    of which before:        p50 ${ms(quantile(toSandbox, 0.5))}  p99 ${ms(quantile(toSandbox, 0.99))}  after: p50 ${ms(quantile(after, 0.5))}  p99 ${ms(quantile(after, 0.99))}`,
  );
}

async function main() {
  await cri.pullImage({ image: { image } });
  await agent.start();
  console.log(
    `agent-startup: relist period ${opts["relist-period"]}, ${opts.starts || "no limit of"} parallel starts, ${opts.rounds} single rounds, ${opts["batch-rounds"]} rounds of ${opts.batch} pods at once`,
  );
  await agentPods(["warm"], async () => {
    template = await captureTemplate();
  });
  if (calibrate) console.log("calibrating: raw pods in the agent's place (the noise floor)");
  await rawPods(["warm"]);
  await settle();
  const single = { agent: [] as AgentTiming[], raw: [] as number[], diff: [] as number[] };
  for (let i = 0; i < opts.rounds; i++) {
    // Alternate which goes first, so that machine noise falls on both alike.
    let a: AgentTiming | undefined;
    if (i % 2 === 0) [a] = await agentSide([`s${i}`]);
    const [r] = await rawPods([`s${i}`]);
    if (i % 2 === 1) [a] = await agentSide([`s${i}`]);
    await settle();
    if (a === undefined || r === undefined) throw new Error("a round produced no timing");
    single.agent.push(a);
    single.raw.push(r);
    single.diff.push(a.latency - r);
  }
  report("1 pod", single.agent, single.raw, single.diff);
  {
    const names = Array.from({ length: opts.batch }, (_, k) => `w${k}`);
    const a = (await agentSide(names)).map((t) => t.latency);
    await settle();
    const r = (await rawPods(names)).sort((x, y) => x - y);
    await settle();
    console.log(
      `  warm-up batch (not counted): agent p50 ${ms(quantile(a, 0.5))}, raw p50 ${ms(quantile(r, 0.5))}, overhead p50 ${ms(
        quantile(
          a.map((t, k) => t - (r[k] as number)),
          0.5,
        ),
      )}`,
    );
  }
  const batch = { agent: [] as AgentTiming[], raw: [] as number[], diff: [] as number[] };
  /** Each round's overhead p50. */
  const roundP50: number[] = [];
  /** Each round's overhead by rank (k-th agent pod against k-th raw pod). */
  const byRound: number[][] = [];
  for (let i = 0; i < opts["batch-rounds"]; i++) {
    const names = Array.from({ length: opts.batch }, (_, k) => `b${i}x${k}`);
    let a: AgentTiming[] = [];
    let r: number[] = [];
    const pid = agent.proc?.pid as number;
    let agentMachine = "";
    const agentRound = async () => {
      const [c0, d0, m0] = [cpuTicks(pid), cpuTicks(containerdPid), machineTicks()];
      a = await agentSide(names);
      const [c1, m1] = [cpuTicks(pid), machineTicks()];
      agentMachine = `agent CPU ${(c1 - c0) * 10} ms, ${containerdMs(d0)}, ${machineShare(m0, m1)}`;
      await settle();
    };
    if (i % 2 === 0) await agentRound();
    const [d0, m0] = [cpuTicks(containerdPid), machineTicks()];
    r = (await rawPods(names)).sort((x, y) => x - y);
    const rawMachine = `${containerdMs(d0)}, ${machineShare(m0, machineTicks())}`;
    await settle();
    if (i % 2 === 1) await agentRound();
    const diff = a.map((t, k) => t.latency - (r[k] as number));
    console.log(
      `  batch round ${i + 1} (${i % 2 === 0 ? "agent" : "raw"} first): agent p50 ${ms(
        quantile(
          a.map((t) => t.latency),
          0.5,
        ),
      )}, raw p50 ${ms(quantile(r, 0.5))}, overhead p50 ${ms(quantile(diff, 0.5))}  max ${ms(Math.max(...diff))}`,
    );
    console.log(`    agent side: ${agentMachine}`);
    console.log(`    raw side:   ${rawMachine}`);
    batch.agent.push(...a);
    batch.raw.push(...r);
    batch.diff.push(...diff);
    roundP50.push(quantile(diff, 0.5));
    byRound.push(diff);
  }
  report(
    `${opts.batch} pods at once (${opts["batch-rounds"]} rounds)`,
    batch.agent,
    batch.raw,
    batch.diff,
  );
  // How far the rounds agree: the pooled figures above lean on a few rounds when they differ.
  const n = roundP50.length;
  const mean = roundP50.reduce((x, y) => x + y, 0) / n;
  const sd = Math.sqrt(roundP50.reduce((x, y) => x + (y - mean) ** 2, 0) / Math.max(1, n - 1));
  console.log(
    `  rounds' overhead p50: mean ${ms(mean)}, sd ${ms(sd)}, standard error of the mean ${ms(sd / Math.sqrt(n))}`,
  );
  // The overhead of the k-th pod of a burst as the median over the rounds: a round the runtime
  // ran slower or faster as a whole (which calibration shows raw calls do against raw calls)
  // moves every pod of that round, and the pooled figures with it; the median of each rank
  // leaves such rounds out. p99 over 30 ranks is the largest.
  const ranks = Array.from({ length: opts.batch }, (_, k) =>
    quantile(
      byRound.map((d) => d[k] as number),
      0.5,
    ),
  );
  const rp50 = quantile(ranks, 0.5);
  const rp99 = quantile(ranks, 0.99);
  console.log(
    `  overhead per pod, median of each rank over the rounds: p50 ${ms(rp50)}  p99 ${ms(rp99)}  (targets: ${rp50 <= 100 ? "yes" : "no"}, ${rp99 <= 300 ? "yes" : "no"})`,
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
  removeScratch();
}
