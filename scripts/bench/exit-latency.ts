// How long a container exit takes to show in the agent's local API: from the exit (the
// container's finishedAt as containerd records it) to the pod watch on the agent's API
// (GET /api/v1/pods?watch=true) delivering the pod with that container terminated.
//
//   node_modules/.bin/bun scripts/bench/exit-latency.ts [--pods 40] [--mode both|events|relist]
//       (needs root, the test bed and a built dist/fleetlet)
//
// Each pod's one container blocks reading a named pipe in a host folder, then exits 7 (so that
// the waiting costs no CPU); the bench writes to the pipes one at a time, 0.3 to 1.3 s apart (at
// random, so that exits fall anywhere in the relist period), with the
// agent at its default timings (relist 1 s; while the runtime's event stream flows, 60 s).
// `--mode both` (the default) runs the same with the event stream turned off
// (--pleg-evented-relist-period 0s: exits seen at the relist, as before) for comparison, in the
// same run. Prints p50, p99 and max per mode, and whether events meet the target (p50 <= 100 ms,
// p99 <= 250 ms). Everything it creates is removed at the end, also on error.
import { execFileSync } from "node:child_process";
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Pod } from "../../src/api/types.ts";
import { watchEvents } from "../../src/cli/client.ts";
import { createCriClient } from "../../src/cri/index.ts";
import { TestAgent } from "../../test/lib/agent.ts";
import { shellPodManifest } from "../../test/lib/manifests.ts";
import {
  benchOptions,
  DEFAULT_TIMING_FLAGS,
  ms,
  quantile,
  removeNodePods,
} from "./agent-common.ts";

const opts = benchOptions("exit-latency", { pods: 40, mode: "both" });
if (!["both", "events", "relist"].includes(opts.mode)) {
  console.error('exit-latency: --mode must be "both", "events" or "relist"');
  process.exit(2);
}

/** A pod whose container exits 7 once something is written to the pipe /h/<name>. */
const manifest = (name: string, dir: string, image: string) =>
  shellPodManifest(name, image, `read x < /h/${name}; exit 7`, {
    hostDir: dir,
    restartPolicy: "Never",
  });

const terminated = (p: Pod) => p.status?.containerStatuses?.[0]?.state?.terminated;
const running = (p: Pod) => p.status?.containerStatuses?.[0]?.state?.running !== undefined;

/** Exit → API latencies (ms) of `pods` pods on an agent with `args`. */
async function measure(mode: "events" | "relist"): Promise<number[]> {
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-exit-bench-"));
  const agent = new TestAgent({
    args: [
      "--pleg-relist-period",
      "1s",
      "--pleg-evented-relist-period",
      mode === "events" ? "60s" : "0s",
      ...DEFAULT_TIMING_FLAGS,
    ],
  });
  const cri = createCriClient({ endpoint: agent.tb.endpoint });
  const stop = new AbortController();
  try {
    await cri.pullImage({ image: { image: agent.tb.busybox } });
    await agent.start();
    const names = Array.from({ length: opts.pods }, (_, i) => `x${i}`);
    for (const n of names) execFileSync("mkfifo", [join(dir, n)]);
    for (const n of names) agent.writeManifest(`${n}.yaml`, manifest(n, dir, agent.tb.busybox));
    const seen = new Map<string, number>(); // pod → wall ms its exit showed
    const runningPods = new Set<string>();
    const res = await agent.request("/api/v1/pods?watch=true", { signal: stop.signal });
    if (!res.ok || res.body === null) throw new Error(`the pod watch answered ${res.status}`);
    const body = res.body;
    void (async () => {
      for await (const event of watchEvents(body, stop.signal)) {
        const name = event.object.metadata.name.replace(`-${agent.nodeName}`, "");
        if (running(event.object)) runningPods.add(name);
        if (terminated(event.object) && !seen.has(name)) seen.set(name, Date.now());
      }
    })().catch(() => {});
    for (let i = 0; i < 1200 && runningPods.size < names.length; i++) await Bun.sleep(100);
    if (runningPods.size < names.length) throw new Error("pods not Running after 120 s");
    await Bun.sleep(3000); // the first relists after the burst, the event stream settled
    const latencies: number[] = [];
    for (const n of names) {
      const fd = openSync(join(dir, n), "w");
      writeSync(fd, "go\n");
      closeSync(fd);
      for (let i = 0; i < 500 && !seen.has(n); i++) await Bun.sleep(10);
      const at = seen.get(n);
      if (at === undefined) throw new Error(`the exit of ${n} did not show within 5 s`);
      const { containers } = await cri.listContainers({
        filter: { labelSelector: { "io.kubernetes.pod.name": `${n}-${agent.nodeName}` } },
      });
      const id = containers[0]?.id ?? "";
      const { status } = await cri.containerStatus({ containerId: id });
      latencies.push(at - (status?.finishedAt ?? 0) / 1e6);
      // A pause of random length, so that exits fall at any point of the relist period.
      await Bun.sleep(300 + Math.random() * 1000);
    }
    return latencies;
  } finally {
    stop.abort();
    await agent.stop("SIGKILL").catch(() => {});
    await removeNodePods(cri, agent.nodeName).catch(() => {});
    await agent.cleanup().catch((e) => console.error(`cleanup of the agent failed: ${e}`));
    cri.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const modes: ("events" | "relist")[] =
  opts.mode === "both" ? ["events", "relist"] : [opts.mode as "events" | "relist"];
console.log(`exit-latency: ${opts.pods} exits, one at a time, per mode`);
for (const mode of modes) {
  const l = await measure(mode);
  const [p50, p99, max] = [quantile(l, 0.5), quantile(l, 0.99), Math.max(...l)];
  const what = mode === "events" ? "with the event stream" : "relist only (events off)";
  console.log(`  ${what.padEnd(26)} exit -> API: p50 ${ms(p50)}  p99 ${ms(p99)}  max ${ms(max)}`);
  if (mode === "events") {
    console.log(
      `  targets p50 <= 100 ms: ${p50 <= 100 ? "yes" : "no"}, p99 <= 250 ms: ${p99 <= 250 ? "yes" : "no"}`,
    );
  }
}
