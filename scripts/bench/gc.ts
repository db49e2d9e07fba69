// Garbage collection at the agent's pod limit: 110 running pods (written to a compiled agent's
// manifest folder) and 50 images in the test bed's containerd.
//
// 1. One GC pass (container GC + image GC + the log rotation check), run in this process with
//    the agent's own code (src/agent/gc, src/agent/images) against the same containerd and node
//    name, timed in CPU (process.cpuUsage, user + system) over --rounds passes, beside the same
//    CRI calls made bare (what any GC must at least ask the runtime each pass). The agent's pods
//    are active and their logs small, so a pass removes and rotates nothing: it is the cost a
//    device pays every period. The first log check reads each container's log path once (110
//    ContainerStatus calls) and is shown apart.
// 2. The agent's idle CPU at 110 pods (% of one core, /proc/<pid>/stat) with its default GC
//    settings, against the same agent with every GC period at 1 h, in alternating windows.
//
//   node_modules/.bin/bun scripts/bench/gc.ts [--pods 110] [--images 50] [--rounds 30]
//       [--window 60] [--windows 2]     (needs root and the test bed)
//
// Images are pushed to the test bed's registry as fleetlet-bench/tiny-<i>:1 (one small text
// layer each; they are never run) and pulled through CRI; the pods and images are removed at the
// end, also on error.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createContainerGC, createLogRotation } from "../../src/agent/gc/index.ts";
import { createImageGC } from "../../src/agent/images/index.ts";
import { nodeSelector } from "../../src/agent/kuberuntime/index.ts";
import { createCriClient } from "../../src/cri/index.ts";
import { realClock } from "../../src/util/clock.ts";
import { nullLogger } from "../../src/util/log.ts";
import { TestAgent } from "../../test/lib/agent.ts";
import {
  benchOptions,
  cpuTicks,
  quantile,
  removeNodePods,
  sleeperManifest,
} from "./agent-common.ts";

const USER_HZ = 100;
const opts = benchOptions("gc", { pods: 110, images: 50, rounds: 30, window: 60, windows: 2 });
const HOUR = ["1h"];
const gcOff = [
  "--container-gc-period",
  ...HOUR,
  "--image-gc-period",
  ...HOUR,
  "--container-log-monitor-interval",
  ...HOUR,
];
const agent = new TestAgent({ args: ["--max-pods", String(opts.pods)] });
const cri = createCriClient({ endpoint: agent.tb.endpoint });
const work = mkdtempSync(join(tmpdir(), "fleetlet-bench-gc-"));
const imageRefs: string[] = [];

/** A one-layer OCI image layout holding the text file /bench/<i>, pushed to the registry. */
async function pushTinyImage(i: number): Promise<string> {
  const dir = join(work, `tiny-${i}`);
  mkdirSync(join(dir, "rootfs", "bench"), { recursive: true });
  writeFileSync(join(dir, "rootfs", "bench", String(i)), `fleetlet bench image ${i}\n`);
  const tar = Bun.spawnSync([
    "tar",
    "--sort=name",
    "--owner=0",
    "--group=0",
    "-C",
    join(dir, "rootfs"),
    "-cf",
    "-",
    ".",
  ]);
  const layer = new Uint8Array(tar.stdout);
  const gz = Bun.gzipSync(layer);
  const sha = (b: Uint8Array | string) => new Bun.CryptoHasher("sha256").update(b).digest("hex");
  const blobs = join(dir, "oci", "blobs", "sha256");
  mkdirSync(blobs, { recursive: true });
  const put = (bytes: Uint8Array | string) => {
    const digest = sha(bytes);
    writeFileSync(join(blobs, digest), bytes);
    return { digest: `sha256:${digest}`, size: Buffer.byteLength(bytes) };
  };
  const layerDesc = put(gz);
  const config = put(
    JSON.stringify({
      architecture: "amd64",
      os: "linux",
      config: {},
      rootfs: { type: "layers", diff_ids: [`sha256:${sha(layer)}`] },
    }),
  );
  const manifest = put(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      config: { mediaType: "application/vnd.oci.image.config.v1+json", ...config },
      layers: [{ mediaType: "application/vnd.oci.image.layer.v1.tar+gzip", ...layerDesc }],
    }),
  );
  writeFileSync(
    join(dir, "oci", "index.json"),
    JSON.stringify({
      schemaVersion: 2,
      manifests: [
        {
          mediaType: "application/vnd.oci.image.manifest.v1+json",
          ...manifest,
          annotations: { "org.opencontainers.image.ref.name": "latest" },
        },
      ],
    }),
  );
  writeFileSync(join(dir, "oci", "oci-layout"), '{"imageLayoutVersion":"1.0.0"}');
  const ref = `${agent.tb.registry}/fleetlet-bench/tiny-${i}:1`;
  const push = Bun.spawnSync([
    "skopeo",
    "copy",
    "-q",
    "--dest-tls-verify=false",
    `oci:${join(dir, "oci")}:latest`,
    `docker://${ref}`,
  ]);
  if (push.exitCode !== 0) throw new Error(`skopeo copy ${ref}: ${push.stderr.toString()}`);
  return ref;
}

async function startPods(n: number): Promise<number> {
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    agent.writeManifest(`p${i}.yaml`, sleeperManifest(`p${i}`, agent.tb.busybox));
  }
  for (;;) {
    const running = (await agent.pods()).filter((p) => p.status?.phase === "Running").length;
    if (running === n) return performance.now() - t0;
    if (performance.now() - t0 > 600_000) throw new Error(`only ${running}/${n} Running`);
    await Bun.sleep(250);
  }
}

/** CPU ms of this process while `fn` runs (user + system). */
async function cpuMs(fn: () => Promise<unknown>): Promise<number> {
  const before = process.cpuUsage();
  await fn();
  const used = process.cpuUsage(before);
  return (used.user + used.system) / 1000;
}

function gcUnderTest() {
  const common = { cri, clock: realClock, logger: nullLogger };
  const containers = createContainerGC({
    ...common,
    nodeName: agent.nodeName,
    policy: { minAgeMs: 0, maxPerPodContainer: 1, maxContainers: -1 },
    periodMs: 60_000,
    createdGraceMs: 120_000,
    sourcesReady: () => true,
    podState: () => "active",
    removeContainer: async () => 0,
    stopContainer: async () => {},
    removeSandbox: async () => {},
    nodeEvent: () => {},
  });
  const images = createImageGC({
    ...common,
    policy: { highThresholdPercent: 85, lowThresholdPercent: 80, minAgeMs: 120_000, maxAgeMs: 0 },
    periodMs: 300_000,
    maxImagesInStatus: 50,
    recordsPath: join(work, "state", "image-gc.json"),
    nodeEvent: () => {},
  });
  const logs = createLogRotation({
    ...common,
    nodeName: agent.nodeName,
    policy: { maxSizeBytes: 10 * 1024 * 1024, maxFiles: 5 },
    monitorIntervalMs: 10_000,
  });
  return { containers, images, logs };
}

/** The CRI calls of one pass, made bare. */
async function rawPass(): Promise<void> {
  const filter = { labelSelector: nodeSelector(agent.nodeName) };
  await Promise.all([cri.listContainers({ filter }), cri.listPodSandbox({ filter })]);
  await Promise.all([cri.listImages({}), cri.listContainers({}), cri.status({ verbose: true })]);
  await cri.imageFsInfo({});
  await cri.listContainers({ filter: { ...filter, state: { state: "CONTAINER_RUNNING" } } });
}

async function passes() {
  const gc = gcUnderTest();
  const first = await cpuMs(() => gc.logs.rotateLogs());
  await gc.images.garbageCollect(); // loads the (empty) records once
  const rows: { containers: number; images: number; logs: number; raw: number }[] = [];
  for (let r = 0; r < opts.rounds + 2; r++) {
    const row = {
      containers: await cpuMs(() => gc.containers.garbageCollect()),
      images: await cpuMs(() => gc.images.garbageCollect()),
      logs: await cpuMs(() => gc.logs.rotateLogs()),
      raw: await cpuMs(rawPass),
    };
    if (r >= 2) rows.push(row); // two warm-up rounds
  }
  return { first, rows };
}

async function idleWindow(args: string[], seconds: number): Promise<number> {
  agent.args = ["--max-pods", String(opts.pods), ...args];
  await agent.start();
  const pid = agent.proc?.pid;
  if (pid === undefined) throw new Error("the agent did not start");
  await Bun.sleep(10_000); // start-up work done
  const ticks0 = cpuTicks(pid);
  const t0 = performance.now();
  await Bun.sleep(seconds * 1000);
  const cpu = ((cpuTicks(pid) - ticks0) / USER_HZ / ((performance.now() - t0) / 1000)) * 100;
  await agent.stop();
  return cpu;
}

async function main() {
  await cri.pullImage({ image: { image: agent.tb.busybox } });
  const t0 = performance.now();
  for (let i = 0; i < opts.images; i++) imageRefs.push(await pushTinyImage(i));
  for (const ref of imageRefs) await cri.pullImage({ image: { image: ref } });
  const present = (await cri.listImages({})).images.length;
  console.log(
    `gc: ${opts.pods} pods, ${present} images in containerd (${opts.images} pushed and pulled in ${((performance.now() - t0) / 1000).toFixed(1)} s)`,
  );
  await agent.start();
  const took = await startPods(opts.pods);
  console.log(`  all ${opts.pods} pods Running after ${(took / 1000).toFixed(1)} s`);
  await agent.stop(); // the pods keep running; the agent is started again for the idle windows

  const { first, rows } = await passes();
  const q = (k: keyof (typeof rows)[number], p: number) =>
    quantile(
      rows.map((r) => r[k]),
      p,
    );
  const total = rows.map((r) => r.containers + r.images + r.logs);
  const line = (name: string, p50: number, p90: number) =>
    `    ${name.padEnd(28)} p50 ${p50.toFixed(2)} ms, p90 ${p90.toFixed(2)} ms`;
  console.log(`  CPU of one GC pass over ${rows.length} rounds:`);
  console.log(line("container GC", q("containers", 0.5), q("containers", 0.9)));
  console.log(line("image GC", q("images", 0.5), q("images", 0.9)));
  console.log(line("log rotation check", q("logs", 0.5), q("logs", 0.9)));
  console.log(line("whole pass", quantile(total, 0.5), quantile(total, 0.9)));
  console.log(line("the same CRI calls, bare", q("raw", 0.5), q("raw", 0.9)));
  const ratio = quantile(total, 0.5) / q("raw", 0.5);
  console.log(`    pass / bare calls (p50): ${ratio.toFixed(2)}`);
  console.log(`    first log check (reads ${opts.pods} log paths): ${first.toFixed(2)} ms`);
  console.log(`    whole pass p90 <= 50 ms: ${quantile(total, 0.9) <= 50 ? "yes" : "no"}`);

  const on: number[] = [];
  const off: number[] = [];
  for (let w = 0; w < opts.windows; w++) {
    on.push(await idleWindow([], opts.window));
    off.push(await idleWindow(gcOff, opts.window));
  }
  const mean = (v: number[]) => v.reduce((a, b) => a + b, 0) / v.length;
  const pct = (v: number[]) => v.map((x) => `${x.toFixed(2)} %`).join(", ");
  console.log(`  agent idle CPU at ${opts.pods} pods (% of one core, ${opts.window} s windows):`);
  console.log(`    default GC settings: ${pct(on)} (mean ${mean(on).toFixed(2)} %)`);
  console.log(`    GC periods 1 h:      ${pct(off)} (mean ${mean(off).toFixed(2)} %)`);
  console.log(`    default GC <= 3 %: ${Math.max(...on) <= 3 ? "yes" : "no"}`);
}

try {
  await main();
} finally {
  await agent.stop("SIGKILL").catch(() => {});
  await removeNodePods(cri, agent.nodeName).catch((e) => console.error(`cleanup failed: ${e}`));
  for (const ref of imageRefs) await cri.removeImage({ image: { image: ref } }).catch(() => {});
  await agent.cleanup().catch((e) => console.error(`cleanup of the agent failed: ${e}`));
  rmSync(work, { recursive: true, force: true });
  cri.close();
}
