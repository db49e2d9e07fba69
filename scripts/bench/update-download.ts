// The agent's download of a release (src/agent/update/download.ts) as a device would run it:
//
//   node_modules/.bin/bun scripts/bench/update-download.ts [--file dist/fleetlet] [--limits 262144,1048576] [--seconds 3]
//       (no root, no test bed; --file: the release to serve, default the built dist/fleetlet)
//
// The release is gzip'd and served from a loopback server with Range support
// (test/lib/release-server.ts). The downloads run in a child Bun (--smol, as the compiled agent
// runs), which reports its peak RSS (VmHWM); a child that only loads the module gives the
// baseline. It prints:
// - a whole download: time, MB/s of the uncompressed executable, peak RSS and its excess over
//   the baseline; the same limited to 16 MiB/s (a fast device link);
// - a download cut at half and resumed by a second child: the compressed bytes served in all,
//   against the compressed size;
// - for each bandwidth limit: an incompressible release of `--seconds` seconds' worth, the
//   achieved rate (compressed bytes over wall time) against the limit. The limiter lets its
//   burst (an eighth of a second's worth) through at once, so the expected figure is
//   bytes / ((bytes - burst) / limit).
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { downloadRelease } from "../../src/agent/update/download.ts";
import { ReleaseServer } from "../../test/lib/release-server.ts";

const repo = resolve(import.meta.dir, "../..");
const bun = process.execPath;
const self = join(import.meta.dir, "update-download.ts");

function peakRssMiB(): number {
  const status = readFileSync("/proc/self/status", "utf8");
  return Number(/^VmHWM:\s*(\d+)\s*kB/m.exec(status)?.[1] ?? Number.NaN) / 1024;
}

/** The child: `--child URL SIZE SHA256 PART OUT [LIMIT]` downloads and prints one JSON line. */
async function child(args: string[]): Promise<void> {
  const [url = "", size = "0", sha256 = "", partPath = "", outPath = "", limit = "0"] = args;
  if (url === "baseline") {
    console.log(JSON.stringify({ peak: peakRssMiB() }));
    return;
  }
  const t0 = performance.now();
  try {
    const r = await downloadRelease({
      url,
      manifest: { size: Number(size), sha256 },
      partPath,
      outPath,
      bandwidthLimit: Number(limit),
    });
    console.log(JSON.stringify({ ok: true, ms: performance.now() - t0, peak: peakRssMiB(), ...r }));
  } catch (err) {
    console.log(JSON.stringify({ ok: false, error: String(err), peak: peakRssMiB() }));
  }
}

interface ChildResult {
  ok?: boolean;
  ms?: number;
  peak: number;
  fetched?: number;
  resumedFrom?: number;
  error?: string;
}

async function runChild(args: string[]): Promise<ChildResult> {
  const p = Bun.spawn([bun, "--smol", self, "--child", ...args], {
    stdout: "pipe",
    stderr: "inherit",
  });
  const out = await new Response(p.stdout).text();
  await p.exited;
  return JSON.parse(out.trim().split("\n").at(-1) ?? "{}") as ChildResult;
}

function randomBytes(n: number): Uint8Array<ArrayBuffer> {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i += 65_536)
    crypto.getRandomValues(b.subarray(i, Math.min(n, i + 65_536)));
  return b;
}

const mib = (n: number) => (n / 1048576).toFixed(1);

async function wholeAndResumed(file: string, dir: string): Promise<void> {
  const raw = readFileSync(file);
  const t0 = performance.now();
  const gz = Bun.gzipSync(raw);
  const sha = createHash("sha256").update(raw).digest("hex");
  console.log(
    `release: ${file}, ${mib(raw.length)} MiB, gzip'd ${mib(gz.length)} MiB (${(performance.now() - t0).toFixed(0)} ms to compress)`,
  );
  const server = await ReleaseServer.start(gz);
  try {
    const base = await runChild(["baseline"]);
    const whole = await runChild([
      server.url,
      String(raw.length),
      sha,
      join(dir, "a.part"),
      join(dir, "a"),
    ]);
    if (!whole.ok) throw new Error(`the whole download failed: ${whole.error}`);
    const ms = whole.ms ?? Number.NaN;
    console.log(
      `whole download: ${ms.toFixed(0)} ms, ${((raw.length / 1e6 / ms) * 1000).toFixed(0)} MB/s uncompressed; peak RSS ${whole.peak.toFixed(1)} MiB (child that only loads the module: ${base.peak.toFixed(1)} MiB; excess ${(whole.peak - base.peak).toFixed(1)} MiB)`,
    );
    const slow = await runChild([
      server.url,
      String(raw.length),
      sha,
      join(dir, "c.part"),
      join(dir, "c"),
      String(16 << 20),
    ]);
    console.log(
      `whole download limited to 16 MiB/s: ${(slow.ms ?? Number.NaN).toFixed(0)} ms; peak RSS ${slow.peak.toFixed(1)} MiB (excess ${(slow.peak - base.peak).toFixed(1)} MiB)`,
    );
    server.served = 0;
    const half = Math.floor(gz.length / 2);
    server.holdNextAfter = half;
    const part = join(dir, "b.part");
    const args = [server.url, String(raw.length), sha, part, join(dir, "b")];
    const first = runChild(args);
    while (!existsSync(part) || statSync(part).size < half) await Bun.sleep(20);
    server.cut();
    const cut = await first;
    const resumed = await runChild(args);
    console.log(
      `cut at half, then resumed: first try ${cut.ok ? "ended?!" : "interrupted"}, second ${resumed.ok ? "verified" : `failed: ${resumed.error}`} (resumed from ${resumed.resumedFrom}); compressed bytes served ${server.served} for a compressed size of ${gz.length} (${server.served - gz.length >= 0 ? "+" : ""}${server.served - gz.length})`,
    );
  } finally {
    await server.stop();
  }
}

async function limited(limit: number, seconds: number, dir: string): Promise<void> {
  const raw = randomBytes(Math.round(limit * seconds));
  const gz = Bun.gzipSync(raw);
  const server = await ReleaseServer.start(gz);
  try {
    const sha = createHash("sha256").update(raw).digest("hex");
    const r = await runChild([
      server.url,
      String(raw.length),
      sha,
      join(dir, `l${limit}.part`),
      join(dir, `l${limit}`),
      String(limit),
    ]);
    if (!r.ok) throw new Error(`the limited download failed: ${r.error}`);
    const achieved = gz.length / ((r.ms ?? Number.NaN) / 1000);
    const expected = gz.length / ((gz.length - Math.floor(limit / 8)) / limit);
    console.log(
      `limit ${limit} B/s over ${gz.length} compressed bytes: achieved ${achieved.toFixed(0)} B/s (${((achieved / limit) * 100).toFixed(1)} % of the limit; expected with the burst ${((expected / limit) * 100).toFixed(1)} %)`,
    );
  } finally {
    await server.stop();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: {
      file: { type: "string", default: join(repo, "dist/fleetlet") },
      limits: { type: "string", default: "262144,1048576" },
      seconds: { type: "string", default: "3" },
    },
    strict: true,
  });
  const file = values.file ?? "";
  if (!existsSync(file))
    throw new Error(`${file} does not exist: run scripts/build or pass --file`);
  const dir = mkdtempSync(join(tmpdir(), "update-download-"));
  try {
    await wholeAndResumed(file, dir);
    for (const limit of (values.limits ?? "").split(",").map(Number)) {
      await limited(limit, Number(values.seconds), dir);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[2] === "--child") await child(process.argv.slice(3));
else await main();
