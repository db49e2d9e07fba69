// An agent update on one device, end to end with the compiled binaries: from the operator's
// `PUT /api/v1/nodes/NODE/update` (what `fleetlet hub update NODE --version V` sends) to the
// agent healthy again on the new version, split into the download and the rest (target: ≤ 15 s
// without the download); and the update's bytes on the wire against the compressed release
// (target: no more than the compressed binary). Two builds of different versions (dist/fleetlet
// and a second build stamped `<version>-bench`), both signed and pushed to the compiled hub
// (HTTPS with its own CA); the agent runs under deploy/fleetlet-launch in a service loop that
// restarts it after the unit's RestartSec, at its default timings, with one sleeper pod, and
// reaches the hub through a counting TCP proxy on loopback (scripts/bench/counting-proxy.ts).
// Rounds flip between the two versions. Needs root and the test bed (containerd).
//   node_modules/.bin/bun scripts/bench/agent-update.ts [--rounds 3] [--restart-sec S]
//   (default S: RestartSec of deploy/systemd/fleetlet-agent.service)
import { copyFileSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { TestAgent } from "../../test/lib/agent.ts";
import { TestHub } from "../../test/lib/hub.ts";
import { serviceCommand } from "../../test/lib/launcher.ts";
import { sleeperManifest } from "../../test/lib/manifests.ts";
import { eventually, fleetletBin, repoRoot } from "../../test/lib/testbed.ts";
import { benchOptions, DEFAULT_TIMING_FLAGS, quantile } from "./agent-common.ts";
import { type Phases, type RoundResult, updateRound } from "./agent-update-round.ts";
import { CountingProxy } from "./counting-proxy.ts";

const unitRestartSec = Number(
  /^RestartSec=(\S+)$/m.exec(
    readFileSync(join(repoRoot, "deploy/systemd/fleetlet-agent.service"), "utf8"),
  )?.[1] ?? "2",
);
const opts = benchOptions("agent-update", { rounds: 3, "restart-sec": unitRestartSec }, [
  "restart-sec",
]);

function run(args: string[], env: Record<string, string> = {}): string {
  const p = Bun.spawnSync(args, {
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, ...env },
  });
  if (p.exitCode !== 0)
    throw new Error(`${args.join(" ")}: ${p.stderr.toString() || p.stdout.toString()}`);
  return p.stdout.toString();
}

const work = mkdtempSync(join(tmpdir(), "fleetlet-bench-update-"));
const hub = new TestHub([], "127.0.0.1", true);
const agentArgs = [...DEFAULT_TIMING_FLAGS, "--pleg-relist-period", "1s"];
const agent = new TestAgent({
  args: agentArgs,
  command: serviceCommand(120, opts["restart-sec"]),
  startTimeoutMs: 30_000,
});
let proxy: CountingProxy | undefined;

/** The two releases, signed with a fresh operator key: [version, executable] of each. */
function makeReleases(): { a: [string, string]; b: [string, string]; pub: string } {
  const versionA = /^fleetlet (\S+)/.exec(run([fleetletBin, "version"]))?.[1];
  if (versionA === undefined) throw new Error(`${fleetletBin} version: no version`);
  const versionB = `${versionA}-bench`;
  const a = join(work, "fleetlet-a");
  const b = join(work, "fleetlet-b");
  copyFileSync(fleetletBin, a);
  run([join(repoRoot, "scripts/build"), "--outfile", b], { FLEETLET_BUILD_VERSION: versionB });
  run([fleetletBin, "release", "keygen", "--out", join(work, "ops")]);
  for (const [v, f] of [
    [versionA, a],
    [versionB, b],
  ] as const)
    run([fleetletBin, "release", "sign", "--key", join(work, "ops.key"), "--version", v, f]);
  const pub = readFileSync(join(work, "ops.pub"), "utf8").trim();
  return { a: [versionA, a], b: [versionB, b], pub };
}

/** The hub's compressed size of each pushed release, by version. */
async function compressedSizes(): Promise<Map<string, number>> {
  const res = await hub.api("/api/v1/releases");
  const list = (await res.json()) as { items: { version: string; compressedSize: number }[] };
  return new Map(list.items.map((r) => [r.version, r.compressedSize]));
}

async function sleeperContainer(): Promise<string> {
  return eventually(
    "the sleeper to run",
    async () => {
      const c = (await agent.pod("keeps").catch(() => undefined))?.status?.containerStatuses?.[0];
      return c?.state.running !== undefined ? c.containerID : undefined;
    },
    60_000,
  );
}

/** The hub knows the node's arch and the version it runs. */
async function nodeRuns(version: string): Promise<void> {
  await eventually(
    `the hub to see the node run ${version}`,
    async () => {
      const res = await hub.api(`/api/v1/nodes/${agent.nodeName}/update`);
      const v = (await res.json()) as { running?: string; arch?: string };
      return v.running === version && v.arch !== undefined ? true : undefined;
    },
    60_000,
  );
}

async function setUp() {
  const rel = makeReleases();
  await hub.start();
  proxy = new CountingProxy({ hostname: "127.0.0.1", port: Number(new URL(hub.url).port) });
  proxy.start();
  const ca = join(hub.dataDir, "tls", "ca.crt");
  for (const [, file] of [rel.a, rel.b])
    run([
      ...[fleetletBin, "hub", "release", "push", file, "--signature", `${file}.sig`],
      ...["--hub", hub.url, "--token", hub.operatorToken, "--ca-file", ca],
    ]);
  writeFileSync(join(work, "config.yaml"), `updatePublicKeys: ["${rel.pub}"]\n`);
  agentArgs.push("--config", join(work, "config.yaml"));
  agentArgs.push("--hub", `https://127.0.0.1:${proxy.port}`, "--join-token", await hub.joinToken());
  await agent.start();
  agent.writeManifest("keeps.yaml", sleeperManifest("keeps", agent.tb.busybox));
  const container = await sleeperContainer();
  await nodeRuns(rel.a[0]);
  return { rel, container, sizes: await compressedSizes() };
}

const s = (ms: number) => (ms / 1000).toFixed(2);
const mb = (b: number) => (b / 1e6).toFixed(2);

function roundLine(i: number, from: string, r: RoundResult, compressed: number): string {
  const p = r.phases;
  const parts = Object.entries(p).map(([k, v]) => `${k} ${s(v)}`);
  return [
    `round ${i + 1}: ${from} → ${r.version}: ${s(r.total)} s (download ${s(p.download)}, rest ${s(r.total - p.download)})`,
    `  ${parts.join(", ")} s`,
    `  hub showed healthy at ${s(r.hubHealthyAt)} s${r.hubMessage === "" ? "" : ` ("${r.hubMessage}")`}, trial closed at ${s(r.passedAt)} s` +
      (r.failures > 0 ? `; ${r.failures} failed download(s) tried again` : ""),
    `  download connection ${r.downloadWire} B (${r.downloadDown} B down) for ${compressed} B compressed: ` +
      `${(r.downloadWire / compressed).toFixed(4)}, ${r.downloadWire - compressed} B more; ` +
      `agent fetched ${r.fetched} B; every agent↔hub connection in the round ${r.allWire} B`,
  ].join("\n");
}

function stats(label: string, xs: number[], fmt: (v: number) => string): string {
  const line = [quantile(xs, 0.5), Math.min(...xs), Math.max(...xs)].map(fmt);
  return `${label.padEnd(26)} ${line.map((v) => v.padStart(12)).join("")}`;
}

function summary(results: RoundResult[], sizes: Map<string, number>): void {
  const size = (r: RoundResult) => sizes.get(r.version) ?? Number.NaN;
  const load = loadavg().map((l) => l.toFixed(1));
  console.log(
    `\n${results.length} rounds, RestartSec ${opts["restart-sec"]} s, load average ${load}`,
  );
  console.log(`${"".padEnd(26)} ${["median", "min", "max"].map((h) => h.padStart(12)).join("")}`);
  for (const k of Object.keys(results[0]?.phases ?? {}) as (keyof Phases)[])
    console.log(
      stats(
        `${k} s`,
        results.map((r) => r.phases[k]),
        s,
      ),
    );
  const rest = results.map((r) => r.total - r.phases.download);
  console.log(
    stats(
      "total s",
      results.map((r) => r.total),
      s,
    ),
  );
  console.log(stats("rest (total − download) s", rest, s));
  const ratio = results.map((r) => r.downloadWire / size(r));
  console.log(stats("wire / compressed", ratio, (v) => v.toFixed(4)));
  const over = results.map((r) => r.downloadWire - size(r));
  console.log(stats("wire − compressed B", over, (v) => v.toFixed(0)));
  console.log(
    stats(
      "all connections MB",
      results.map((r) => r.allWire),
      mb,
    ),
  );
  console.log(`rest <= 15 s in every round: ${Math.max(...rest) <= 15_000 ? "yes" : "no"}`);
  console.log(`download wire <= compressed: ${Math.max(...over) <= 0 ? "yes" : "no"}`);
}

async function main(): Promise<void> {
  const { rel, container, sizes } = await setUp();
  const binMiB = (f: string) => (statSync(f).size / 2 ** 20).toFixed(1);
  for (const [v, f] of [rel.a, rel.b])
    console.log(
      `release ${v}: ${binMiB(f)} MiB, ${sizes.get(v)} B compressed (gzip, as the hub serves it)`,
    );
  const results: RoundResult[] = [];
  let running = rel.a[0];
  for (let i = 0; i < opts.rounds; i++) {
    const next = i % 2 === 0 ? rel.b[0] : rel.a[0];
    const ctx = { agent, hub, proxy: proxy as CountingProxy };
    const r = await updateRound(ctx, next);
    console.log(roundLine(i, running, r, sizes.get(next) ?? Number.NaN));
    results.push(r);
    running = next;
  }
  summary(results, sizes);
  const kept = (await sleeperContainer()) === container;
  console.log(`the pod kept its container through every update: ${kept ? "yes" : "no"}`);
}

try {
  await main();
} catch (err) {
  console.error(`agent-update benchmark failed: ${(err as Error).message}`);
  process.exitCode = 1;
} finally {
  await agent.stop().catch(() => {});
  await agent.cleanup().catch((e) => console.error(`cleanup of the agent failed: ${e}`));
  proxy?.stop();
  await hub.cleanup();
  rmSync(work, { recursive: true, force: true });
}
