// The manifest folder under a seeded stream of hostile files for about 30 s: random bytes,
// near-valid manifests (valid ones with fields removed, retyped, made huge or given random
// values), YAML bombs and deep nesting, a 50 MB file, files renamed or deleted mid-write, and
// symlinks to /dev/zero and to a fifo. The running pod is never touched, every bad file that
// stays is reported naming it, the agent's RSS stays bounded, and a valid manifest written
// afterwards still starts its pod. The compiled agent against the real test bed; needs root and
// the test bed. FLEETLET_E2E_SEED=N replays a stream; FLEETLET_E2E_HOSTILE_MS sets its length.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import {
  closeSync,
  existsSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { parseManifestFile } from "../../src/agent/sources/parse.ts";
import { validatePod } from "../../src/api/index.ts";
import type { Pod } from "../../src/api/types.ts";
import { TestAgent } from "../lib/agent.ts";
import {
  arbitraryText,
  hostileYaml,
  nearValid,
  validPod,
  writeObject,
} from "../lib/kube-arbitraries.ts";
import { sleeperManifest } from "../lib/manifests.ts";
import { prng } from "../lib/prng.ts";
import { eventually } from "../lib/testbed.ts";

const seed = Number(process.env.FLEETLET_E2E_SEED ?? 30_351);
const streamMs = Number(process.env.FLEETLET_E2E_HOSTILE_MS ?? 30_000);
/** A generous bound on the agent's resident memory (it idles near 80 MB). */
const MAX_RSS_MB = 200;
/** Bad files kept in the folder at once; the oldest is deleted beyond it. */
const MAX_KEPT = 40;

const agent = new TestAgent();
const img = agent.tb.busybox;

const statusOf = (p: Pod) => p.status?.containerStatuses?.find((c) => c.name === "c");
const running = (p: Pod) =>
  p.status?.phase === "Running" && statusOf(p)?.state?.running !== undefined;

function rssMB(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8").match(/^VmRSS:\s+(\d+) kB$/m);
  return Number(line?.[1] ?? 0) / 1024;
}

/** Near-valid pods that do not validate (a valid one would start a pod), named so that none
 * can claim the running pod's name. */
function invalidPods(n: number): string[] {
  const pods = fc.sample(
    nearValid(validPod.map((p) => ({ ...p, metadata: { ...(p.metadata as object), name: "fz" } }))),
    { seed, numRuns: n * 3 },
  );
  const writes = fc.sample(fc.constantFrom("yaml", "flow", "json"), { seed, numRuns: pods.length });
  return pods
    .map((p, i) => ({ p, as: writes[i] ?? "yaml" }))
    .filter(({ p }) => !validatePod(p).ok)
    .slice(0, n)
    .map(({ p, as }) => writeObject(p, as));
}

/** The seeded stream: each step writes, renames or deletes files in the manifest folder. */
class HostileStream {
  private readonly rand = prng(seed);
  private readonly pods = invalidPods(300);
  /** Hostile texts that the parser refuses (a text of comments only is a valid empty file). */
  private readonly texts = fc
    .sample(fc.oneof(arbitraryText, hostileYaml), { seed, numRuns: 300 })
    .filter((t) => !parseManifestFile(t, { path: "x", nodeName: "n" }).ok);
  private bigWritten = false;
  /** Bad files present now, oldest first. */
  readonly kept: string[] = [];
  private n = 0;
  steps = 0;

  constructor(private readonly dir: string) {}

  private pick<T>(list: readonly T[]): T {
    return list[Math.floor(this.rand() * list.length)] as T;
  }

  private keep(name: string): void {
    this.kept.push(name);
    while (this.kept.length > MAX_KEPT) rmSync(join(this.dir, this.kept.shift() as string));
  }

  /** How long to wait before the next step (ms). */
  pause(): number {
    return 20 + Math.floor(this.rand() * 80);
  }

  /** One step; names sort after the running pod's file ("zz-..."). */
  step(): void {
    this.steps++;
    const name = `zz-${String(this.n++).padStart(4, "0")}.yaml`;
    const path = join(this.dir, name);
    const r = this.rand();
    if (r < 0.15) {
      this.midWrite(path, this.rand() < 0.5);
      return;
    }
    if (r < 0.22) this.special(path);
    else writeFileSync(path, this.content(r));
    this.keep(name);
  }

  /** A bad file's content: a near-valid pod, hostile text, random bytes, or a huge comment. */
  private content(r: number): string | Buffer {
    if (r < 0.5) return this.pick(this.pods);
    if (r < 0.75) return this.pick(this.texts);
    if (r < 0.9) return Buffer.from(Array.from({ length: 200 }, () => this.rand() * 256));
    return `${this.pick(this.pods)}# ${"x".repeat(300_000)}`;
  }

  /** A file renamed (or deleted) while it is being written. */
  private midWrite(path: string, rename: boolean): void {
    const text = this.pick(this.pods);
    const fd = openSync(path, "w");
    writeSync(fd, text.slice(0, text.length / 2));
    if (rename) renameSync(path, `${path}.moved.yaml`);
    else unlinkSync(path);
    writeSync(fd, text.slice(text.length / 2));
    closeSync(fd);
    if (rename) rmSync(`${path}.moved.yaml`);
  }

  /** A 50 MB file, a symlink to /dev/zero, or a symlink to a fifo at `path`. */
  private special(path: string): void {
    const kind = this.bigWritten ? 1 + Math.floor(this.rand() * 2) : 0;
    this.bigWritten = true;
    if (kind === 0) writeFileSync(path, Buffer.alloc(50 * 1024 * 1024, "a"));
    else if (kind === 1) symlinkSync("/dev/zero", path);
    else {
      const fifo = join(agent.dir, "fifo");
      if (!existsSync(fifo)) Bun.spawnSync(["mkfifo", fifo]);
      symlinkSync(fifo, path);
    }
  }
}

beforeAll(async () => {
  agent.writeManifest("keeper.yaml", sleeperManifest("keeper", img));
  await agent.start();
}, 60_000);

afterAll(async () => {
  await agent.cleanup();
}, 120_000);

describe("fleetlet agent under a stream of hostile manifests (needs root and the test bed)", () => {
  test("keeps its pod, reports every bad file, stays bounded and still starts a new pod", async () => {
    const before = await agent.waitPod("keeper", "Running", running);
    const pid = agent.proc?.pid as number;
    const stream = new HostileStream(agent.manifests);
    let maxRss = rssMB(pid);
    const end = Date.now() + streamMs;
    while (Date.now() < end) {
      stream.step();
      maxRss = Math.max(maxRss, rssMB(pid));
      await Bun.sleep(stream.pause());
    }
    console.log(
      `hostile manifests: seed ${seed}, ${stream.steps} steps in ${streamMs} ms, agent VmRSS at most ${maxRss.toFixed(1)} MB`,
    );

    // Every bad file still there is reported, naming it (an event, or the agent's log line).
    for (const name of stream.kept) {
      const path = join(agent.manifests, name);
      await eventually(
        `a report of ${name}`,
        async () =>
          agent.output.includes(path) ||
          (await agent.events()).some(
            (e) => e.reason === "InvalidManifest" && e.message.includes(path),
          ),
        20_000,
        250,
      );
    }
    maxRss = Math.max(maxRss, rssMB(pid));
    expect(agent.proc?.exitCode ?? null).toBeNull();
    expect(maxRss).toBeLessThan(MAX_RSS_MB);

    const after = await agent.waitPod("keeper", "Running", running);
    expect(statusOf(after)?.containerID).toBe(statusOf(before)?.containerID as string);
    expect(statusOf(after)?.restartCount).toBe(0);

    agent.writeManifest("fresh.yaml", sleeperManifest("fresh", img));
    await agent.waitPod("fresh", "Running", running, 60_000);
  }, 240_000);
});
