// A chaos soak (docs/reliability.md): a seeded random schedule of manifest and DaemonSet changes
// interleaved with faults, and after every round a quiet period in which the faults are mended
// and the invariants (invariants.ts) must come to hold. The seed replays the schedule; a
// violation names the seed, the round, the step that preceded it and the differences.
import { unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { hubCliAsync, tempManifest } from "../deploy.ts";
import { prng } from "../prng.ts";
import { FAULT_KINDS, type FaultKind, Faults } from "./faults.ts";
import { type Bounds, checkOnce, type FirstContainers } from "./invariants.ts";
import {
  daemonSetManifest,
  invalidEdits,
  Model,
  POD_KINDS,
  type PodKind,
  podManifest,
} from "./workload.ts";
import { SoakWorld } from "./world.ts";

export interface SoakOptions {
  seed: number;
  /** Stop starting rounds after this long (ms). */
  durationMs: number;
  /** End the soak with a violation when it is still running after this long (ms): a part that
   * hangs is reported with what the soak was waiting for, instead of running on. */
  limitMs: number;
  /** Steps per round, before its quiet period. */
  stepsPerRound: number;
  /** How long a quiet period may take to reach the invariants (ms). */
  settleMs: number;
  /** Manifest files at most at once. */
  maxFiles: number;
  bounds: Bounds;
  log: (line: string) => void;
}

interface Violation {
  seed: number;
  round: number;
  lastStep: string;
  differences: string[];
}

export interface SoakReport {
  seed: number;
  rounds: number;
  operations: Record<string, number>;
  faults: Record<string, number>;
  checks: number;
  /** Restarts of never-restarting pods with a reason: a start cut by the agent's or containerd's kill. */
  excused: number;
  violations: Violation[];
  maxRssBytes: number;
  maxOpenFiles: number;
  eventsDroppedReported: number;
  elapsedMs: number;
}

type Op = "create" | "edit" | "invalid" | "delete" | "ds-apply" | "ds-roll" | "ds-delete";

class Soak {
  readonly world = new SoakWorld({ rootFsMiB: 48, imageFsMiB: 400, outboxMaxEvents: 30 });
  readonly model = new Model();
  readonly rand: () => number;
  readonly faults: Faults;
  readonly first: FirstContainers = new Map();
  readonly report: SoakReport;
  private nextFile = 0;
  private lastStep = "(none)";
  /** What the soak awaits now, for a report when it runs past its limit. */
  doing = "starting the hub, containerd and the agent";
  private readonly began = performance.now();
  /** The last lines logged, with their time since the start, for the same report. */
  private readonly recent: string[] = [];
  /** Whether the agent was killed since the last quiet period. */
  private agentKilled = false;
  /** containerd was killed during the current round (a start in flight may have been cut). */
  private runtimeKilled = false;

  constructor(readonly opts: SoakOptions) {
    this.rand = prng(opts.seed);
    this.faults = new Faults(this.world, this.rand);
    this.report = {
      seed: opts.seed,
      rounds: 0,
      operations: {},
      faults: {},
      checks: 0,
      excused: 0,
      violations: [],
      maxRssBytes: 0,
      maxOpenFiles: 0,
      eventsDroppedReported: 0,
      elapsedMs: 0,
    };
  }

  log(line: string): void {
    this.recent.push(`[${((performance.now() - this.began) / 1000).toFixed(0)} s] ${line}`);
    if (this.recent.length > 20) this.recent.shift();
    this.opts.log(line);
  }

  /** Ends the soak's report with a violation: it ran past its limit while doing `doing`. */
  overran(): void {
    this.stopped(
      new Error(
        `the soak ran past its limit of ${this.opts.limitMs} ms while ${this.doing}; its last lines:\n${this.recent.join("\n")}`,
      ),
    );
  }

  private pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.rand() * items.length)] as T;
  }

  private count(table: Record<string, number>, key: string): void {
    table[key] = (table[key] ?? 0) + 1;
  }

  private writeFile(file: string, text: string): void {
    const tmp = join(this.world.agent.dir, `.${file}.tmp`);
    writeFileSync(tmp, text);
    // A rename, as a careful writer does; the invalid edits stand for the careless ones.
    Bun.spawnSync(["mv", tmp, join(this.world.agent.manifests, file)]);
  }

  /** One manifest or DaemonSet operation. */
  private async operate(): Promise<string> {
    const m = this.model;
    const files = [...m.files.values()];
    const ops: Op[] = ["create", "edit", "invalid", "delete", "edit", "create"];
    if (m.daemonSets.size < 2) ops.push("ds-apply");
    if (m.daemonSets.size > 0) ops.push("ds-roll", "ds-delete");
    let op = this.pick(ops);
    if (files.length === 0 && op !== "ds-apply" && !op.startsWith("ds")) op = "create";
    if (op === "create" && files.length >= this.opts.maxFiles) op = "edit";
    this.count(this.report.operations, op);
    const image = this.world.agent.tb.busybox;
    switch (op) {
      case "create": {
        const kind: PodKind = this.pick(POD_KINDS);
        const n = this.nextFile++;
        const f = { file: `p${n}.yaml`, name: `soak-${kind}-${n}`, kind, gen: m.gen() };
        m.files.set(f.file, { ...f, valid: true, seen: false, durable: false });
        this.writeFile(f.file, podManifest(f.name, kind, image, f.gen));
        return `create ${f.file} (${kind}, gen ${f.gen})`;
      }
      case "edit": {
        const f = this.pick(files);
        f.gen = m.gen();
        f.valid = true;
        f.seen = false;
        f.durable = false;
        this.writeFile(f.file, podManifest(f.name, f.kind, image, f.gen));
        return `edit ${f.file} to gen ${f.gen}`;
      }
      case "invalid": {
        // Only a version the agent has saved is kept by an invalid edit (and across its
        // restarts); which one it has seen a moment before would be a race, so the edit picks
        // a file whose version was shown at the end of a quiet period.
        const durable = files.filter((x) => x.durable);
        if (durable.length === 0) return "invalid edit skipped: no file's version saved yet";
        const f = this.pick(durable);
        const bad = this.pick(invalidEdits(podManifest(f.name, f.kind, image, f.gen + 1000)));
        f.valid = false;
        this.writeFile(f.file, bad);
        return `invalid edit of ${f.file} (${bad.length} bytes; gen ${f.gen} keeps running)`;
      }
      case "delete": {
        const f = this.pick(files);
        m.files.delete(f.file);
        unlinkSync(join(this.world.agent.manifests, f.file));
        return `delete ${f.file}`;
      }
      default:
        return this.daemonSetOp(op);
    }
  }

  /** Marks the files whose current version the agent shows (the agent must be up). */
  private async noteSeen(): Promise<void> {
    const pods = await this.world.agent.pods().catch(() => []);
    const gens = new Map(pods.map((p) => [p.metadata.name, p.metadata.labels?.["soak-gen"]]));
    for (const f of this.model.files.values()) {
      if (f.valid && gens.get(`${f.name}-${this.world.agent.nodeName}`) === String(f.gen))
        f.seen = true;
    }
  }

  private async daemonSetOp(op: Op): Promise<string> {
    const m = this.model;
    const hub = this.world.hub;
    if (op === "ds-delete") {
      const d = this.pick([...m.daemonSets.values()]);
      const path = `/apis/apps/v1/namespaces/default/daemonsets/${d.name}`;
      const status = await hub
        .api(path, { method: "DELETE" })
        .then((r) => r.status)
        .catch(() => 0);
      if (status === 0 || status >= 300)
        return `ds-delete ${d.name}: refused (${status || "hub away"})`;
      m.daemonSets.delete(d.name);
      return `ds-delete ${d.name}`;
    }
    const name =
      op === "ds-roll" ? this.pick([...m.daemonSets.keys()]) : `soak-ds-${this.nextFile++}`;
    const gen = m.gen();
    const file = tempManifest(
      `${name}.yaml`,
      daemonSetManifest(name, this.world.agent.tb.busybox, gen),
    );
    const p = await hubCliAsync(hub, ["apply", "-f", file]);
    if (p.code !== 0) return `${op} ${name}: refused (${p.stderr.trim()})`;
    m.daemonSets.set(name, { name, gen });
    return `${op} ${name} gen ${gen}`;
  }

  /** One step: mostly an operation, sometimes a fault. */
  async step(): Promise<void> {
    let line: string;
    if (this.rand() < 0.35) {
      const kind: FaultKind = this.pick(FAULT_KINDS);
      this.count(this.report.faults, kind);
      const startsBefore = this.faults.agentStarts;
      this.doing = `injecting the fault ${kind}`;
      line = `fault: ${await this.faults.inject(kind)}`;
      if (this.faults.agentStarts !== startsBefore || kind === "agent-kill") {
        this.model.agentRestarted();
        this.agentKilled = true;
      }
      if (kind === "containerd-restart") this.runtimeKilled = true;
    } else {
      this.doing = "an operation (a manifest write or a DaemonSet call to the hub)";
      line = await this.operate();
    }
    this.lastStep = line;
    this.log(line);
    this.doing = "waiting between steps";
    await Bun.sleep(500 + Math.floor(this.rand() * 3000));
  }

  /** Mends the faults and waits for the invariants; records a violation when they never hold. */
  async quiet(round: number): Promise<void> {
    const startsBefore = this.faults.agentStarts;
    this.doing = `mending the faults of round ${round}`;
    const healed = await this.faults.heal();
    for (const line of healed) this.log(`heal: ${line}`);
    if (this.faults.agentStarts !== startsBefore) this.model.agentRestarted();
    const wanted = this.model.wanted(this.world.agent.nodeName);
    const deadline = performance.now() + this.opts.settleMs;
    let differences: string[] = [];
    for (;;) {
      this.report.checks++;
      const round = {
        agentKilled: this.agentKilled,
        runtimeKilled: this.runtimeKilled,
        excused: [] as string[],
      };
      this.doing = `checking the invariants after round ${round} (check ${this.report.checks})`;
      differences = await within(
        CHECK_LIMIT_MS,
        checkOnce(this.world, wanted, this.first, this.opts.bounds, round),
      ).catch((err: unknown) => [`a check failed: ${(err as Error).message}`]);
      this.noteResources();
      for (const line of round.excused) this.log(`excused: ${line}`);
      this.report.excused += round.excused.length;
      if (differences.length === 0 || performance.now() > deadline) break;
      await Bun.sleep(2000);
    }
    if (differences.length === 0 && healed.some((l) => l.includes("space freed"))) {
      // A save of a last valid version failed on the full disk is made again at the agent's
      // next relist of its folder (every 2 s here).
      await Bun.sleep(3000);
    }
    this.doing = `noting the versions the agent shows after round ${round}`;
    await within(CHECK_LIMIT_MS, this.noteSeen()).catch(() => {});
    for (const f of this.model.files.values()) if (f.seen) f.durable = true;
    this.agentKilled = false;
    this.runtimeKilled = false;
    if (differences.length === 0) {
      this.log(`round ${round}: all invariants hold (${wanted.size} pods wanted)`);
      return;
    }
    const v = { seed: this.opts.seed, round, lastStep: this.lastStep, differences };
    this.keepOutputs(round);
    this.report.violations.push(v);
    this.log(`VIOLATION seed ${v.seed} round ${round} after "${v.lastStep}":`);
    for (const d of differences) this.log(`  ${d}`);
  }

  /** Keeps the agent's and the hub's whole output next to the report, for a violation. */
  private keepOutputs(round: number): void {
    const base = join(tmpdir(), `fleetlet-soak-${this.opts.seed}-round${round}`);
    writeFileSync(`${base}-agent.log`, this.world.agent.output);
    writeFileSync(`${base}-hub.log`, this.world.hub.output);
    this.log(`outputs kept in ${base}-agent.log and ${base}-hub.log`);
  }

  /** Records why the soak could not go on, with the last output of the hub and the agent. */
  stopped(err: unknown): void {
    const tail = (text: string) => text.split("\n").slice(-15).join("\n");
    const differences = [
      `the soak could not go on: ${(err as Error).stack ?? String(err)}`,
      `hub output:\n${tail(this.world.hub.output)}`,
      `agent output:\n${tail(this.world.agent.output)}`,
    ];
    const v = {
      seed: this.opts.seed,
      round: this.report.rounds + 1,
      lastStep: this.lastStep,
      differences,
    };
    this.keepOutputs(v.round);
    this.report.violations.push(v);
    this.log(`VIOLATION seed ${v.seed} round ${v.round} after "${v.lastStep}":`);
    for (const d of differences) this.log(`  ${d}`);
  }

  private noteResources(): void {
    const used = this.world.agentResources();
    if (used === undefined) return;
    this.report.maxRssBytes = Math.max(this.report.maxRssBytes, used.rss);
    this.report.maxOpenFiles = Math.max(this.report.maxOpenFiles, used.fds);
  }
}

/** Counts the EventsDropped events the hub holds for the node: drops said, not silent. */
async function droppedReported(world: SoakWorld): Promise<number> {
  const res = await world.hub.api("/api/v1/events");
  if (res.status !== 200) return 0;
  const items = ((await res.json()) as { items: { reason?: string; count?: number }[] }).items;
  return items.filter((e) => e.reason === "EventsDropped").reduce((n, e) => n + (e.count ?? 1), 0);
}

/** One check may take this long; a part that does not answer is a difference, not a hang. */
const CHECK_LIMIT_MS = 30_000;

class Late extends Error {}

/** `p`, or a rejection (Late) when it has not settled within `ms`. */
function within<T>(ms: number, p: Promise<T>): Promise<T> {
  let timer: Timer | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Late(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/** Runs a soak; resolves with its report (violations included, never thrown). */
export async function runSoak(opts: SoakOptions): Promise<SoakReport> {
  const soak = new Soak(opts);
  const started = performance.now();
  let halted = false;
  opts.log(`soak seed ${opts.seed} (replay: scripts/soak --seed ${opts.seed})`);
  const body = async (): Promise<void> => {
    await soak.world.start();
    for (let round = 1; performance.now() - started < opts.durationMs && !halted; round++) {
      for (let i = 0; i < opts.stepsPerRound && !halted; i++) await soak.step();
      if (halted) return;
      await soak.quiet(round);
      soak.report.rounds = round;
    }
    soak.doing = "counting the drops the hub reports";
    soak.report.eventsDroppedReported = await droppedReported(soak.world);
  };
  try {
    await within(opts.limitMs, body()).catch((err: unknown) => {
      halted = true;
      if (err instanceof Late) soak.overran();
      else throw err;
    });
  } catch (err) {
    // A part that would not come back (the hub, the agent, containerd) ends the soak: that is a
    // violation too, with what the part said last.
    soak.stopped(err);
  } finally {
    soak.report.elapsedMs = Math.round(performance.now() - started);
    await within(60_000, soak.world.cleanup()).catch((err: unknown) =>
      opts.log(`cleanup: ${(err as Error).message}`),
    );
  }
  return soak.report;
}
