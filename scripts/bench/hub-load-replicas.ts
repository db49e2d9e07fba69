// hub-load.ts --replicas N --store postgres --bus nats: the hub as N replicas of dist/fleetlet on
// a throwaway PostgreSQL (scripts/lib/postgres.ts) and nats-server (scripts/lib/nats.ts), the
// simulated agents (hub-load-agents.ts) each given the replicas' URLs as one comma-separated
// list, as the agent's --hub takes them. Measures over the steady window: ingest latency (a delta
// sent → its ack, sent once PostgreSQL committed it), each replica's RSS and CPU, PostgreSQL's
// CPU, transactions and rows (pg_stat_database); then SIGKILLs one replica and times its agents'
// return through the others. Needs root (initdb runs as `postgres`) and scripts/build.
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseDuration } from "../../src/api/duration.ts";
import { type NatsServer, startNatsServer } from "../lib/nats.ts";
import { PostgresCluster } from "../lib/postgres.ts";
import {
  cpuSeconds,
  machineCpu,
  type PgCounters,
  pgCounters,
  postmasterPid,
  timeWalIo,
  treeCpuSeconds,
} from "./hub-cluster-procs.ts";
import {
  freePort,
  HubProcess,
  joinAll,
  pct,
  runBench,
  spawnWorkers,
  ulimit,
} from "./hub-common.ts";

interface WorkerStats {
  open: number;
  openByUrl: number[];
  caughtUp: number;
  reconnectedCaughtUp: number;
  errors: number;
  errorCodes: Record<string, number>;
}

interface Opts {
  agents: number;
  workers: number;
  replicas: number;
  steadyMs: number;
  deltaMs: number;
  rampMs: number;
  fsync: boolean;
  /** Each replica's open-files limit (undefined: as high as this machine allows). */
  hubFiles: number | undefined;
}

let dir = "";
const stats: WorkerStats[] = [];
let latencies: number[] = [];
const procs: ReturnType<typeof Bun.spawn>[] = [];
const replicas: HubProcess[] = [];
let pg: PostgresCluster | undefined;
let nats: NatsServer | undefined;
/** Each replica's RSS (MiB) before the agents connected. */
let baseRss: number[] = [];
/** How long the agents of a killed replica are waited for. */
const BACK_WITHIN_MS = 120_000;

const sum = (k: "open" | "caughtUp" | "reconnectedCaughtUp" | "errors") =>
  stats.reduce((a, s) => a + (s?.[k] ?? 0), 0);
/** Error messages the agents received, by code. */
function codes(): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of stats)
    for (const [c, n] of Object.entries(s?.errorCodes ?? {})) out[c] = (out[c] ?? 0) + n;
  return out;
}
const openAt = (r: number) => stats.reduce((a, s) => a + (s?.openByUrl[r] ?? 0), 0);
const secs = (t: number) => ((Date.now() - t) / 1000).toFixed(1);
const mb = (mib: number) => (mib * 1.048576).toFixed(0);

function options(args: Map<string, string>): Opts {
  const store = args.get("store") ?? "postgres";
  const bus = args.get("bus") ?? "nats";
  if (store !== "postgres" || bus !== "nats")
    throw new Error("--replicas runs on --store postgres --bus nats (the bench starts both)");
  const agents = Number(args.get("agents") ?? 5_000);
  // A process may hold 20,000 open files here: at most ~18,000 agents a worker.
  const workers = Number(args.get("workers") ?? Math.max(4, Math.ceil(agents / 18_000)));
  return {
    agents,
    workers,
    replicas: Number(args.get("replicas") ?? 3),
    steadyMs: parseDuration(args.get("steady") ?? "30s"),
    deltaMs: parseDuration(args.get("delta") ?? "10s"),
    rampMs: parseDuration(args.get("ramp") ?? "60s"),
    fsync: (args.get("fsync") ?? "on") === "on",
    hubFiles: args.has("hub-files") ? Number(args.get("hub-files")) : undefined,
  };
}

/** PostgreSQL and nats-server, then replica 1 alone (it makes the schema and the identity),
 * the nodes joined through it, then the other replicas (they load the credentials at start). */
async function startCluster(o: Opts): Promise<{ db: string; creds: [string, string][] }> {
  pg = await PostgresCluster.start({ fsync: o.fsync });
  const db = await pg.createDatabase("hubload");
  await timeWalIo(pg.url());
  nats = await startNatsServer();
  const key = join(dir, "secrets.key");
  writeFileSync(key, `${randomBytes(32).toString("base64")}\n`, { mode: 0o600 });
  for (let i = 1; i <= o.replicas; i++) {
    const extra = ["--store", db, "--bus", nats.url, "--secrets-key-file", key];
    const limit = o.hubFiles === undefined ? ulimit : `ulimit -n ${o.hubFiles}`;
    const id = ["--replica-id", `hub-${i}`];
    const r = new HubProcess(join(dir, `hub-${i}`), freePort(), [...extra, ...id], limit);
    r.token = "from the data folder";
    replicas.push(r);
  }
  const first = replicas[0] as HubProcess;
  await startReplica(first);
  first.token = readFileSync(join(dir, "hub-1", "operator-token"), "utf8").trim();
  const t = Date.now();
  const creds = await joinAll(first.url, first.token, o.agents);
  console.log(`joined ${o.agents} nodes through hub-1 in ${secs(t)} s`);
  await Promise.all(replicas.slice(1).map(startReplica));
  baseRss = replicas.map((r) => r.rss());
  const rss = baseRss.map((m, i) => `hub-${i + 1} ${mb(m)} MB`).join(", ");
  console.log(`${o.replicas} replicas up; RSS before agents: ${rss}`);
  return { db, creds };
}

async function startReplica(r: HubProcess): Promise<void> {
  await r.start();
  const deadline = Date.now() + 60_000;
  while ((await fetch(`${r.url}/livez`).catch(() => undefined))?.ok !== true) {
    if (Date.now() > deadline) throw new Error(`replica ${r.url} did not answer /livez:\n${r.out}`);
    await Bun.sleep(100);
  }
}

function spawnAgents(o: Opts, creds: [string, string][]): void {
  procs.push(
    ...spawnWorkers({
      dir,
      creds,
      workers: o.workers,
      script: "hub-load-agents.ts",
      url: replicas.map((r) => r.url).join(","),
      args: [String(o.deltaMs), String(o.rampMs)],
      onLine: (w, l) => {
        const s = JSON.parse(l) as WorkerStats & { latencies: number[] };
        stats[w] = s;
        for (const x of s.latencies) latencies.push(x);
      },
    }),
  );
}

/** Every process's CPU seconds now: replicas, PostgreSQL, the agents' workers, the machine. */
function cpuNow(pgPid: number) {
  return {
    replicas: replicas.map((r) => cpuSeconds(r.proc?.pid ?? 0)),
    pg: treeCpuSeconds(pgPid),
    workers: procs.reduce((a, p) => a + cpuSeconds(p.pid), 0),
    machine: machineCpu(),
  };
}

export async function replicasMain(args: Map<string, string>): Promise<void> {
  const o = options(args);
  dir = mkdtempSync(join(tmpdir(), "fleetlet-hub-load-"));
  await runBench(
    "hub-load --replicas",
    async () => {
      const { db, creds } = await startCluster(o);
      spawnAgents(o, creds);
      await connected(o);
      // Each agent starts its delta timer up to one period after its welcome.
      await Bun.sleep(o.deltaMs);
      await steady(o, db);
      await killOne();
    },
    cleanup,
  );
}

/** Waits for every agent to be connected and acknowledged, up to the ramp and 180 s more;
 * short of that it says how far they got and the bench goes on with them. */
async function connected(o: Opts): Promise<void> {
  const t = Date.now();
  const all = () => sum("caughtUp") >= o.agents && sum("open") >= o.agents;
  while (!all() && Date.now() - t < o.rampMs + 180_000) await Bun.sleep(100);
  const spread = replicas.map((_, i) => openAt(i)).join(" / ");
  const ramp = `ramp ${o.rampMs / 1000} s`;
  console.log(
    all()
      ? `all ${o.agents} agents connected and acknowledged after ${secs(t)} s (${ramp}); per replica ${spread}`
      : `after ${secs(t)} s (${ramp}) only ${sum("open")} of ${o.agents} agents connected, ${sum("caughtUp")} acknowledged; per replica ${spread}`,
  );
}

/** The steady window: latency, RSS, CPU, PostgreSQL's transactions and rows. */
async function steady(o: Opts, db: string): Promise<void> {
  const pgPid = postmasterPid(join(pg?.dir ?? "", "data"));
  const held = replicas.map((_, i) => openAt(i));
  const pg0 = await pgCounters(db);
  const cpu0 = cpuNow(pgPid);
  latencies = [];
  const maxRss = replicas.map(() => 0);
  const end = Date.now() + o.steadyMs;
  while (Date.now() < end) {
    replicas.forEach((r, i) => {
      maxRss[i] = Math.max(maxRss[i] ?? 0, r.rss());
    });
    await Bun.sleep(1000);
  }
  const cpu1 = cpuNow(pgPid);
  const pg1 = await pgCounters(db);
  const lat = latencies;
  const s = o.steadyMs / 1000;
  console.log(
    `steady ${s} s: ${lat.length} deltas acked (${(lat.length / s).toFixed(0)}/s), ingest latency p50 ${pct(lat, 50).toFixed(1)} ms, p99 ${pct(lat, 99).toFixed(1)} ms, max ${pct(lat, 100).toFixed(1)} ms (target p99 <= 200 ms: ${pct(lat, 99) <= 200 ? "yes" : "no"})`,
  );
  printReplicas(held, maxRss, cpu0.replicas, cpu1.replicas, lat.length, s);
  printPg(pg0, pg1, lat.length, s);
  const pgCpu = cpu1.pg - cpu0.pg;
  const wCpu = cpu1.workers - cpu0.workers;
  const busy = cpu1.machine.busy - cpu0.machine.busy;
  const total = cpu1.machine.total - cpu0.machine.total;
  console.log(
    `CPU (% of one core): PostgreSQL ${((pgCpu / s) * 100).toFixed(0)} % (${((pgCpu / Math.max(1, lat.length)) * 1000).toFixed(3)} ms a report), agents' workers ${((wCpu / s) * 100).toFixed(0)} %, the whole machine ${((busy / total) * 100).toFixed(0)} % busy of its cores`,
  );
}

function printReplicas(
  held: number[],
  maxRss: number[],
  cpu0: number[],
  cpu1: number[],
  reports: number,
  s: number,
): void {
  const total = held.reduce((a, b) => a + b, 0);
  held.forEach((n, i) => {
    const cpu = (cpu1[i] ?? 0) - (cpu0[i] ?? 0);
    const share = (reports * n) / Math.max(1, total);
    const rss = maxRss[i] ?? 0;
    const perAgent = ((rss - (baseRss[i] ?? 0)) * 1048.576) / Math.max(1, n);
    console.log(
      `  hub-${i + 1}: ${n} agents, RSS max ${mb(rss)} MB (target <= 400 MB: ${rss * 1.048576 <= 400 ? "yes" : "no"}; ${perAgent.toFixed(1)} kB an agent over its RSS before them), CPU ${((cpu / s) * 100).toFixed(0)} % of a core, ${((cpu / Math.max(1, share)) * 1000).toFixed(3)} ms a report`,
    );
  });
}

function printPg(a: PgCounters, b: PgCounters, reports: number, s: number): void {
  const tx = b.xactCommit - a.xactCommit;
  const rows =
    b.tupInserted - a.tupInserted + (b.tupUpdated - a.tupUpdated) + (b.tupDeleted - a.tupDeleted);
  const r = Math.max(1, reports);
  const syncs = b.walSyncs - a.walSyncs;
  console.log(
    `PostgreSQL: ${(tx / s).toFixed(1)} transactions/s, ${(rows / s).toFixed(0)} rows written/s (inserted ${b.tupInserted - a.tupInserted}, updated ${b.tupUpdated - a.tupUpdated}, deleted ${b.tupDeleted - a.tupDeleted}); per report ${(rows / r).toFixed(2)} rows, ${(tx / r).toFixed(4)} transactions (${(reports / Math.max(1, tx)).toFixed(1)} reports a transaction); WAL ${((b.walBytes - a.walBytes) / s / 1e6).toFixed(2)} MB/s (${((b.walBytes - a.walBytes) / r / 1000).toFixed(1)} kB a report), ${(syncs / s).toFixed(1)} syncs/s taking ${((b.walSyncMs - a.walSyncMs) / Math.max(1, syncs)).toFixed(1)} ms each on average`,
  );
}

/** SIGKILLs the last replica and times its agents' return through the others (waited for
 * BACK_WITHIN_MS; short of that, it says how many came back). */
async function killOne(): Promise<void> {
  const k = replicas.length - 1;
  const held = openAt(k);
  const before = sum("open");
  const cpu0 = replicas.map((r) => cpuSeconds(r.proc?.pid ?? 0));
  const t = Date.now();
  replicas[k]?.proc?.kill("SIGKILL");
  let welcomed = Number.NaN;
  let acked = Number.NaN;
  while (Date.now() - t < BACK_WITHIN_MS && Number.isNaN(acked)) {
    await Bun.sleep(100);
    if (Number.isNaN(welcomed) && openAt(k) === 0 && sum("open") >= before)
      welcomed = (Date.now() - t) / 1000;
    if (!Number.isNaN(welcomed) && sum("reconnectedCaughtUp") >= held)
      acked = (Date.now() - t) / 1000;
  }
  const spread = replicas.map((_, i) => openAt(i)).join(" / ");
  const took = (Date.now() - t) / 1000;
  const rss = replicas
    .slice(0, k)
    .map((r, i) => {
      const cpu = (cpuSeconds(r.proc?.pid ?? 0) - (cpu0[i] ?? 0)) / took;
      return `hub-${i + 1} ${mb(r.rss())} MB, ${(cpu * 100).toFixed(0)} % of a core since the kill`;
    })
    .join("; ");
  const back = Number.isNaN(welcomed)
    ? `only ${sum("open")} of the ${before} agents connected before came back within ${BACK_WITHIN_MS / 1000} s (target <= 60 s: no)`
    : `all welcomed by the others in ${welcomed.toFixed(1)} s (target <= 60 s: ${welcomed <= 60 ? "yes" : "no"}), their resends acknowledged in ${Number.isNaN(acked) ? `more than ${BACK_WITHIN_MS / 1000}` : acked.toFixed(1)} s`;
  console.log(
    `hub-${k + 1} killed (SIGKILL) holding ${held} agents: ${back}; per replica now ${spread}; RSS ${rss}; error messages received ${sum("errors")} ${JSON.stringify(codes())}`,
  );
}

function cleanup(): void {
  for (const p of procs) p.kill("SIGKILL");
  for (const r of replicas) r.proc?.kill("SIGKILL");
  void nats?.stop();
  void pg?.remove();
  if (dir !== "") rmSync(dir, { recursive: true, force: true });
}
