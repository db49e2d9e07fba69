// What our CRI client costs over raw grpc-js, measured against the real test bed's containerd.
//
// Each round runs RunPodSandbox (host network), CreateContainer (busybox `sleep 3600`) and
// StartContainer twice: once through createCriClient (src/cri) and once through a bare grpc-js
// client built from the same package definition (no deadline, no error mapping, default channel
// options). The two paths alternate which goes first, so machine noise hits both alike, and the
// overhead is the per-round paired difference (ours - raw). Teardown (StopPodSandbox +
// RemovePodSandbox) is not timed. Then: the size of dist/fleetlet and the median peak RSS of
// `dist/fleetlet runtime-info` over 5 runs.
//
//   node_modules/.bin/bun scripts/bench/cri-overhead.ts [--rounds N]     (default 30; needs root
//   and `scripts/testbed start`)
//
// Every sandbox it creates carries the label io.fleetlet.bench-run=<run id> and is removed at the
// end, on error and on Ctrl-C.

import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  type Client,
  credentials,
  type ServiceDefinition as GrpcServiceDefinition,
  makeGenericClientConstructor,
  type ServiceError,
} from "@grpc/grpc-js";
import type { MethodDefinition, ServiceDefinition } from "@grpc/proto-loader";
import {
  type ContainerConfig,
  CRI_PACKAGE,
  type CriClient,
  createCriClient,
  type PodSandboxConfig,
} from "../../src/cri/index.ts";
import { loadCriPackageDefinition } from "../../test/lib/cri-proto.ts";
import { loadTestbed, repoRoot } from "../../test/lib/testbed.ts";

const CALLS = ["RunPodSandbox", "CreateContainer", "StartContainer"] as const;
type Call = (typeof CALLS)[number];
type Path = "ours" | "raw";
type Timings = Record<Call, number>;
const OVERHEAD_LIMIT_MS = 5;
const RSS_RUNS = 5;

function parseArgs(argv: string[]): { rounds: number } {
  let rounds = 30;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    let value: string | undefined;
    if (arg === "--rounds") value = argv[++i];
    else if (arg?.startsWith("--rounds=")) value = arg.slice("--rounds=".length);
    else if (arg === "-h" || arg === "--help") {
      console.log("usage: bun scripts/bench/cri-overhead.ts [--rounds N]");
      process.exit(0);
    } else {
      console.error(`cri-overhead: unknown argument ${JSON.stringify(arg)}`);
      process.exit(2);
    }
    rounds = Number(value);
    if (!Number.isInteger(rounds) || rounds < 1) {
      console.error(
        `cri-overhead: --rounds needs a positive integer, got ${JSON.stringify(value)}`,
      );
      process.exit(2);
    }
  }
  return { rounds };
}

// ---- statistics ----

/** Linear-interpolation percentile (p in 0..100) of unsorted values. */
function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = (p / 100) * (sorted.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  const a = sorted[lo] ?? Number.NaN;
  const b = sorted[hi] ?? Number.NaN;
  return a + (b - a) * (rank - lo);
}

function mean(values: readonly number[]): number {
  return values.reduce((s, v) => s + v, 0) / values.length;
}

const ms = (v: number, width = 9): string => `${v.toFixed(2)}`.padStart(width);

// ---- the raw grpc-js path ----

interface RawRpc {
  path: string;
  serialize: (value: unknown) => Buffer;
  deserialize: (buf: Buffer) => unknown;
}

function rawRuntimeService(endpoint: string): {
  client: Client;
  rpcs: Record<Call, RawRpc>;
} {
  const pkg = loadCriPackageDefinition();
  const svc = pkg[`${CRI_PACKAGE}.RuntimeService`] as ServiceDefinition | undefined;
  if (!svc) throw new Error("the CRI package definition has no RuntimeService");
  const Ctor = makeGenericClientConstructor(
    svc as unknown as GrpcServiceDefinition,
    "RuntimeService",
  );
  // grpc-js takes "unix:///abs/path" as is.
  const client = new Ctor(endpoint, credentials.createInsecure());
  const rpcs = {} as Record<Call, RawRpc>;
  for (const call of CALLS) {
    const def = svc[call] as MethodDefinition<unknown, unknown> | undefined;
    if (!def) throw new Error(`the CRI package definition has no RuntimeService.${call}`);
    rpcs[call] = {
      path: def.path,
      serialize: def.requestSerialize,
      deserialize: def.responseDeserialize,
    };
  }
  return { client, rpcs };
}

function rawUnary<Res>(client: Client, rpc: RawRpc, req: unknown): Promise<Res> {
  return new Promise<Res>((resolve, reject) => {
    client.makeUnaryRequest<unknown, Res>(
      rpc.path,
      rpc.serialize,
      rpc.deserialize as (buf: Buffer) => Res,
      req,
      (err: ServiceError | null, res?: Res) => (err ? reject(err) : resolve(res as Res)),
    );
  });
}

// ---- peak RSS of the binary ----

async function peakRssViaTime(cmd: string[]): Promise<number> {
  const proc = Bun.spawn(["/usr/bin/time", "-v", ...cmd], { stdout: "ignore", stderr: "pipe" });
  const [stderr, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`${cmd.join(" ")} exited ${code}: ${stderr.trim()}`);
  const m = /Maximum resident set size \(kbytes\):\s*(\d+)/.exec(stderr);
  if (!m?.[1]) throw new Error(`no "Maximum resident set size" in /usr/bin/time output`);
  return Number(m[1]) / 1024;
}

async function peakRssViaProc(cmd: string[]): Promise<number> {
  const proc = Bun.spawn(cmd, { stdout: "ignore", stderr: "pipe" });
  let done = false;
  const exited = proc.exited.then((code) => {
    done = true;
    return code;
  });
  let hwmKb = 0;
  while (!done) {
    try {
      const status = readFileSync(`/proc/${proc.pid}/status`, "utf8");
      const m = /^VmHWM:\s*(\d+)\s*kB/m.exec(status);
      if (m?.[1]) hwmKb = Math.max(hwmKb, Number(m[1]));
    } catch {
      // gone between polls: keep the last reading
    }
    await Bun.sleep(1);
  }
  const code = await exited;
  if (code !== 0) {
    const stderr = await new Response(proc.stderr).text();
    throw new Error(`${cmd.join(" ")} exited ${code}: ${stderr.trim()}`);
  }
  return hwmKb / 1024;
}

// ---- main ----

const { rounds } = parseArgs(process.argv.slice(2));
const tb = loadTestbed();
const runId = Date.now().toString(36);
const logRoot = mkdtempSync(join(tmpdir(), "fleetlet-bench-"));
const ours: CriClient = createCriClient({ endpoint: tb.endpoint });
const raw = rawRuntimeService(tb.endpoint);
const live = new Set<string>();
let interrupted = false;

function sandboxConfig(name: string): PodSandboxConfig {
  return {
    metadata: { name, namespace: "bench", uid: `uid-${name}`, attempt: 0 },
    hostname: "",
    logDirectory: join(logRoot, name),
    labels: { "io.fleetlet.bench": "cri-overhead", "io.fleetlet.bench-run": runId },
    linux: {
      securityContext: { namespaceOptions: { network: "NODE", pid: "CONTAINER" } },
    },
  };
}

function containerConfig(): ContainerConfig {
  return {
    metadata: { name: "sleeper", attempt: 0 },
    image: { image: tb.busybox },
    command: ["sleep", "3600"],
    logPath: "sleeper/0.log",
  };
}

async function teardown(podSandboxId: string): Promise<void> {
  await ours.stopPodSandbox({ podSandboxId });
  await ours.removePodSandbox({ podSandboxId });
  live.delete(podSandboxId);
}

/** One create-and-start of a sandbox with one container along `path`; returns the call times. */
async function runOnce(path: Path, name: string): Promise<Timings> {
  const config = sandboxConfig(name);
  const t: Timings = { RunPodSandbox: 0, CreateContainer: 0, StartContainer: 0 };
  let t0 = performance.now();
  const { podSandboxId } =
    path === "ours"
      ? await ours.runPodSandbox({ config })
      : await rawUnary<{ podSandboxId: string }>(raw.client, raw.rpcs.RunPodSandbox, { config });
  t.RunPodSandbox = performance.now() - t0;
  live.add(podSandboxId);

  const createReq = { podSandboxId, config: containerConfig(), sandboxConfig: config };
  t0 = performance.now();
  const { containerId } =
    path === "ours"
      ? await ours.createContainer(createReq)
      : await rawUnary<{ containerId: string }>(raw.client, raw.rpcs.CreateContainer, createReq);
  t.CreateContainer = performance.now() - t0;

  t0 = performance.now();
  if (path === "ours") await ours.startContainer({ containerId });
  else await rawUnary(raw.client, raw.rpcs.StartContainer, { containerId });
  t.StartContainer = performance.now() - t0;

  await teardown(podSandboxId);
  return t;
}

async function cleanup(): Promise<void> {
  for (const id of [...live]) {
    await teardown(id).catch((err) =>
      console.error(`cri-overhead: cleanup of sandbox ${id}: ${(err as Error).message}`),
    );
  }
  // Also sweep by label: a sandbox whose RunPodSandbox answer never came back is not in `live`.
  try {
    const { items } = await ours.listPodSandbox({
      filter: { labelSelector: { "io.fleetlet.bench-run": runId } },
    });
    for (const sb of items) await teardown(sb.id).catch(() => {});
  } catch (err) {
    console.error(`cri-overhead: cleanup sweep: ${(err as Error).message}`);
  }
}

process.on("SIGINT", () => {
  if (interrupted) process.exit(130);
  interrupted = true;
  console.error("cri-overhead: interrupted; cleaning up after the current round (again to force)");
});

let exitCode = 0;
try {
  const v = await ours.version({ version: "v1" });
  await ours.pullImage({ image: { image: tb.busybox } });
  await ours.pullImage({ image: { image: tb.sandboxImage } });
  console.log(
    `cri-overhead: ${rounds} rounds against ${v.runtimeName} ${v.runtimeVersion} at ${tb.endpoint}`,
  );
  console.log(
    "order alternates (even rounds: ours first); 1 warm-up round per path not counted; times in ms",
  );

  // Warm-up: connects both channels and warms the JIT and containerd's caches.
  await runOnce("ours", `bench-${runId}-warm-ours`);
  await runOnce("raw", `bench-${runId}-warm-raw`);

  const samples: Record<Path, Timings[]> = { ours: [], raw: [] };
  for (let r = 0; r < rounds; r++) {
    if (interrupted) throw new Error(`interrupted after ${r} rounds`);
    const order: Path[] = r % 2 === 0 ? ["ours", "raw"] : ["raw", "ours"];
    for (const path of order)
      samples[path].push(await runOnce(path, `bench-${runId}-r${r}-${path}`));
  }

  const header = `${"call".padEnd(16)}${["ours p50", "ours p90", "raw p50", "raw p90", "diff p50", "diff mean"].map((h) => h.padStart(10)).join("")}`;
  console.log(header);
  let allWithin = true;
  const rows: [string, (t: Timings) => number][] = [
    ...CALLS.map((c): [string, (t: Timings) => number] => [c, (t) => t[c]]),
    ["all three", (t) => t.RunPodSandbox + t.CreateContainer + t.StartContainer],
  ];
  for (const [label, pick] of rows) {
    const o = samples.ours.map(pick);
    const w = samples.raw.map(pick);
    const d = o.map((v, i) => v - (w[i] ?? Number.NaN));
    const diffP50 = percentile(d, 50);
    if (label !== "all three" && !(diffP50 <= OVERHEAD_LIMIT_MS)) allWithin = false;
    console.log(
      `${label.padEnd(16)}${[percentile(o, 50), percentile(o, 90), percentile(w, 50), percentile(w, 90), diffP50, mean(d)].map((x) => ms(x, 10)).join("")}`,
    );
  }

  await cleanup();

  const bin = join(repoRoot, "dist/fleetlet");
  if (existsSync(bin)) {
    const bytes = statSync(bin).size;
    console.log(
      `dist/fleetlet size: ${(bytes / 2 ** 20).toFixed(1)} MiB (${(bytes / 1e6).toFixed(1)} MB)`,
    );
    const cmd = [bin, "runtime-info", "--runtime-endpoint", tb.endpoint];
    const viaTime = existsSync("/usr/bin/time");
    const peaks: number[] = [];
    for (let i = 0; i < RSS_RUNS; i++) {
      peaks.push(await (viaTime ? peakRssViaTime(cmd) : peakRssViaProc(cmd)));
    }
    console.log(
      `dist/fleetlet runtime-info peak RSS: median ${percentile(peaks, 50).toFixed(1)} MiB over ${RSS_RUNS} runs (min ${Math.min(...peaks).toFixed(1)}, max ${Math.max(...peaks).toFixed(1)}; ${viaTime ? "/usr/bin/time -v" : "VmHWM polling"})`,
    );
  } else {
    console.log("dist/fleetlet size: not built (run scripts/build); peak RSS skipped");
  }

  console.log(`overhead per call p50 <= ${OVERHEAD_LIMIT_MS} ms: ${allWithin ? "yes" : "no"}`);
} catch (err) {
  console.error(`cri-overhead: ${(err as Error).stack ?? err}`);
  exitCode = 1;
} finally {
  await cleanup();
  ours.close();
  raw.client.close();
  rmSync(logRoot, { recursive: true, force: true });
}
process.exit(exitCode);
