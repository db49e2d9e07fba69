// The two gRPC stacks side by side in one run, for the choice in docs/grpc-stack.md: our own
// HTTP/2 client (src/cri/transport.ts) and @grpc/grpc-js (src/cri/transport-grpcjs.ts), each
// carrying the same CRI codec. The compiled agent is started with one stack or the other
// (FLEETLET_CRI_STACK; each stack is loaded only when chosen), the two taking turns round by round:
//
// - idle: RSS (VmRSS) and CPU (utime+stime from /proc) of an agent with no pods, 10 s after start,
//   over a 10 s window;
// - a burst: N manifests written at once (default 30); the agent's CPU from the write until all
//   are Running (seen through a pod watch) plus 3 s; its RSS 10 s later, and its CPU over 20 s
//   with the pods running (two CRI list calls a second);
// - per call, in this process: CPU (user+sys) of Version and of ListContainers (after the
//   rounds: the test bed's containers, usually none), 500 calls each, for each stack.
//
//   node_modules/.bin/bun scripts/bench/grpc-stack.ts [--rounds 3] [--pods 30]
//       (needs root, the test bed and a built dist/fleetlet)
//
// The agent runs at its default timings (relist 1 s, sync 60 s, file check 20 s, housekeeping
// 2 s). Between rounds its pods are gone from containerd, the page cache is dropped and
// containerd is quiet (agent-common.ts). Everything it creates is removed at the end.
import { readFileSync } from "node:fs";
import type { Pod } from "../../src/api/types.ts";
import { watchEvents } from "../../src/cli/client.ts";
import { type CriStack, createCriClient } from "../../src/cri/index.ts";
import { TestAgent } from "../../test/lib/agent.ts";
import {
  benchOptions,
  cpuTicks,
  quantile,
  quietRuntime,
  releaseDyingCgroups,
  removeNodePods,
  rssMB,
  sleeperManifest,
} from "./agent-common.ts";

const opts = benchOptions("grpc-stack", { rounds: 3, pods: 30 });
const STACKS: CriStack[] = ["h2", "grpc-js"];
const cri = createCriClient({ endpoint: new TestAgent().tb.endpoint });
const tb = new TestAgent().tb;
const containerdPid = Number(readFileSync(tb.containerdPidFile, "utf8").trim());

interface Figures {
  idleRss: number;
  idleCpuPct: number;
  burstCpuMs: number;
  podsRss: number;
  podsCpuPct: number;
}

const isRunning = (p: Pod) =>
  p.status?.phase === "Running" && p.status.containerStatuses?.[0]?.state?.running !== undefined;

/** CPU % of one core of `pid` over `seconds`. */
async function cpuOver(pid: number, seconds: number): Promise<number> {
  const t0 = cpuTicks(pid);
  await Bun.sleep(seconds * 1000);
  return cpuTicks(pid) - t0;
}

/** Writes the manifests and resolves once every pod is Running in the agent's API. */
async function burst(agent: TestAgent, names: string[]): Promise<void> {
  const want = new Set(names.map((n) => `${n}-${agent.nodeName}`));
  const stop = new AbortController();
  const timeout = setTimeout(() => stop.abort(), 180_000);
  const res = await agent.request("/api/v1/pods?watch=true", { signal: stop.signal });
  if (!res.ok || res.body === null) throw new Error(`the pod watch answered ${res.status}`);
  const body = res.body;
  for (const n of names) agent.writeManifest(`${n}.yaml`, sleeperManifest(n, tb.busybox));
  try {
    for await (const event of watchEvents(body, stop.signal)) {
      if (isRunning(event.object)) want.delete(event.object.metadata.name);
      if (want.size === 0) break;
    }
  } finally {
    clearTimeout(timeout);
    stop.abort();
  }
  if (want.size > 0) throw new Error(`${want.size} pods not Running after 180 s`);
}

async function agentRound(stack: CriStack, round: number): Promise<Figures> {
  const agent = new TestAgent({
    env: { FLEETLET_CRI_STACK: stack },
    args: [
      "--pleg-relist-period",
      "1s",
      "--file-check-frequency",
      "20s",
      "--housekeeping-interval",
      "2s",
      "--sync-frequency",
      "60s",
    ],
  });
  try {
    await agent.start();
    const pid = agent.proc?.pid as number;
    await Bun.sleep(10_000);
    const idleTicks = await cpuOver(pid, 10);
    const idleRss = rssMB(pid);
    const names = Array.from({ length: opts.pods }, (_, k) => `r${round}x${k}`);
    const c0 = cpuTicks(pid);
    await burst(agent, names);
    await Bun.sleep(3000);
    const burstCpuMs = (cpuTicks(pid) - c0) * 10;
    await Bun.sleep(7000);
    const podsRss = rssMB(pid);
    const podsTicks = await cpuOver(pid, 20);
    for (const n of names) agent.removeManifest(`${n}.yaml`);
    for (let i = 0; i < 1200 && (await agent.pods()).length > 0; i++) await Bun.sleep(100);
    return {
      idleRss,
      idleCpuPct: idleTicks / 10,
      burstCpuMs,
      podsRss,
      podsCpuPct: podsTicks / 20,
    };
  } finally {
    await agent.stop("SIGKILL").catch(() => {});
    await removeNodePods(cri, agent.nodeName).catch(() => {});
    await agent.cleanup().catch((e) => console.error(`cleanup of the agent failed: ${e}`));
    releaseDyingCgroups();
    await quietRuntime(containerdPid);
  }
}

/** CPU (µs, user+sys of this process) per call of `fn`, over `n` calls one after another. */
async function perCall(fn: () => Promise<unknown>, n: number): Promise<number> {
  for (let i = 0; i < 50; i++) await fn();
  const u0 = process.cpuUsage();
  for (let i = 0; i < n; i++) await fn();
  const u = process.cpuUsage(u0);
  return (u.user + u.system) / n;
}

const median = (xs: number[]) => quantile(xs, 0.5);
const f1 = (x: number) => x.toFixed(1);

async function main() {
  await cri.pullImage({ image: { image: tb.busybox } });
  console.log(`grpc-stack: ${opts.rounds} rounds per stack, ${opts.pods} pods a burst`);
  const figures: Record<CriStack, Figures[]> = { h2: [], "grpc-js": [] };
  for (let r = 0; r < opts.rounds; r++) {
    const order = r % 2 === 0 ? STACKS : [...STACKS].reverse();
    for (const stack of order) {
      const f = await agentRound(stack, r);
      figures[stack].push(f);
      console.log(
        `  round ${r + 1} ${stack.padEnd(7)} idle RSS ${f1(f.idleRss)} MB, idle CPU ${f1(f.idleCpuPct)} %, burst CPU ${f.burstCpuMs} ms, RSS with pods ${f1(f.podsRss)} MB, CPU with pods ${f1(f.podsCpuPct)} %`,
      );
    }
  }
  const calls: Record<CriStack, { version: number[]; list: number[] }> = {
    h2: { version: [], list: [] },
    "grpc-js": { version: [], list: [] },
  };
  const clients = Object.fromEntries(
    STACKS.map((s) => [s, createCriClient({ endpoint: tb.endpoint, stack: s })]),
  ) as Record<CriStack, ReturnType<typeof createCriClient>>;
  for (let r = 0; r < 4; r++) {
    for (const s of r % 2 === 0 ? STACKS : [...STACKS].reverse()) {
      calls[s].version.push(await perCall(() => clients[s].version({}), 500));
      calls[s].list.push(await perCall(() => clients[s].listContainers({}), 500));
    }
  }
  for (const c of Object.values(clients)) c.close();
  console.log("medians over the rounds:");
  for (const s of STACKS) {
    const fs = figures[s];
    const m = (k: keyof Figures) => median(fs.map((f) => f[k]));
    console.log(
      `  ${s.padEnd(7)} idle RSS ${f1(m("idleRss"))} MB, idle CPU ${f1(m("idleCpuPct"))} %, burst CPU ${m("burstCpuMs")} ms, RSS with ${opts.pods} pods ${f1(m("podsRss"))} MB, CPU with pods ${f1(m("podsCpuPct"))} %; per call: Version ${median(calls[s].version).toFixed(0)} µs, ListContainers ${median(calls[s].list).toFixed(0)} µs of CPU`,
    );
  }
  const ratio = (k: keyof Figures) =>
    median(figures["grpc-js"].map((f) => f[k])) / median(figures.h2.map((f) => f[k]));
  const diff = (k: keyof Figures) =>
    median(figures["grpc-js"].map((f) => f[k])) - median(figures.h2.map((f) => f[k]));
  console.log(
    `grpc-js against h2: idle RSS ${diff("idleRss") >= 0 ? "+" : ""}${f1(diff("idleRss"))} MB, RSS with pods ${diff("podsRss") >= 0 ? "+" : ""}${f1(diff("podsRss"))} MB, burst CPU x${ratio("burstCpuMs").toFixed(2)}`,
  );
  console.log(
    `rule (docs/grpc-stack.md): grpc-js costs more than 5 MB of RSS: ${Math.max(diff("idleRss"), diff("podsRss")) > 5 ? "yes" : "no"}; more than 10 % of burst CPU: ${ratio("burstCpuMs") > 1.1 ? "yes" : "no"}`,
  );
}

try {
  await main();
} finally {
  cri.close();
}
