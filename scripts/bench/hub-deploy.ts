// Deploying from `fleetlet hub` to a fleet: one DaemonSet applied to N simulated devices at the
// protocol level (no containers; scripts/bench/hub-deploy-agents.ts), the hub in its own process
// (dist/fleetlet). Measures the time from the apply until every device has acknowledged (stored
// and applied) its desired state with the DaemonSet's pod, then until the hub's DaemonSet status
// counts every device updated and ready; and the hub's RSS throughout.
//
//   node_modules/.bin/bun scripts/bench/hub-deploy.ts [--agents 10000] [--workers 4] [--ramp 20s]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseDuration } from "../../src/api/duration.ts";
import {
  benchArgs,
  freePort,
  HubProcess,
  joinAll,
  runBench,
  spawnWorkers,
  until,
} from "./hub-common.ts";

const args = benchArgs();
const N = Number(args.get("agents") ?? 10_000);
const W = Number(args.get("workers") ?? 4);
const rampMs = parseDuration(args.get("ramp") ?? "20s");
const dir = mkdtempSync(join(tmpdir(), "fleetlet-hub-deploy-"));
const procs: ReturnType<typeof Bun.spawn>[] = [];
const stats: { open: number; running: number; lastAckAt: number; errors: number }[] = [];
let hub: HubProcess | undefined;

const sum = (k: "open" | "running" | "errors") => stats.reduce((a, s) => a + (s?.[k] ?? 0), 0);

const daemonSet = {
  apiVersion: "apps/v1",
  kind: "DaemonSet",
  metadata: { name: "camera", namespace: "default" },
  spec: {
    selector: { matchLabels: { app: "camera" } },
    template: {
      metadata: { labels: { app: "camera" } },
      spec: {
        nodeSelector: { site: "bench" },
        containers: [
          {
            name: "camera",
            image: "registry.example/camera:1.4.2",
            command: ["/bin/camera", "--listen", ":8080"],
            resources: { requests: { cpu: "100m", memory: "64Mi" } },
            readinessProbe: { httpGet: { path: "/healthz", port: 8080 } },
          },
        ],
      },
    },
  },
};

async function status(url: string, token: string) {
  const res = await fetch(`${url}/apis/apps/v1/namespaces/default/daemonsets/camera`, {
    headers: { authorization: `Bearer ${token}` },
  });
  return ((await res.json()) as { status?: Record<string, number> }).status ?? {};
}

async function main(): Promise<void> {
  hub = new HubProcess(join(dir, "hub"), freePort());
  await hub.start();
  const h = hub;
  let t = Date.now();
  const creds = await joinAll(h.url, h.token, N, { site: "bench" });
  console.log(`joined ${N} nodes in ${((Date.now() - t) / 1000).toFixed(1)} s`);
  procs.push(
    ...spawnWorkers({
      dir,
      creds,
      workers: W,
      script: "hub-deploy-agents.ts",
      url: h.url,
      args: [String(rampMs)],
      onLine: (w, l) => {
        stats[w] = JSON.parse(l);
      },
    }),
  );
  await until(`${N} devices connected`, () => sum("open") >= N, rampMs + 120_000);
  const idleRss = h.rss();
  console.log(`all ${N} devices connected; hub RSS ${idleRss.toFixed(0)} MiB`);
  let maxRss = idleRss;
  const sampler = setInterval(() => {
    maxRss = Math.max(maxRss, h.rss());
  }, 100);

  t = Date.now();
  const res = await fetch(`${h.url}/apis/apps/v1/namespaces/default/daemonsets/camera`, {
    method: "PUT",
    headers: { authorization: `Bearer ${h.token}` },
    body: JSON.stringify(daemonSet),
  });
  if (res.status !== 201) throw new Error(`apply: HTTP ${res.status}: ${await res.text()}`);
  const applyMs = Date.now() - t;
  await until(`${N} devices acknowledging the DaemonSet's pod`, () => sum("running") >= N, 120_000);
  const acked = (Math.max(...stats.map((s) => s.lastAckAt)) - t) / 1000;
  let s: Record<string, number> = {};
  for (;;) {
    s = await status(h.url, h.token);
    if (s.updatedNumberScheduled === N && s.numberReady === N) break;
    if (Date.now() - t > 180_000) throw new Error(`status after 180 s: ${JSON.stringify(s)}`);
    await Bun.sleep(250);
  }
  const ready = (Date.now() - t) / 1000;
  clearInterval(sampler);
  console.log(
    `apply answered in ${applyMs} ms (validated, stored, ${N} assignments and desired states written)`,
  );
  console.log(
    `all ${N} devices stored and acknowledged the desired state in ${acked.toFixed(1)} s (target <= 30 s: ${acked <= 30 ? "yes" : "no"})`,
  );
  console.log(
    `DaemonSet status: ${s.desiredNumberScheduled} desired, ${s.updatedNumberScheduled} updated, ${s.numberReady} ready, ${ready.toFixed(1)} s after the apply`,
  );
  console.log(
    `hub RSS max ${maxRss.toFixed(0)} MiB (${(maxRss * 1.048576).toFixed(0)} MB; target <= 400 MB: ${maxRss * 1.048576 <= 400 ? "yes" : "no"}); error messages received ${sum("errors")}`,
  );
}

function cleanup(): void {
  for (const p of procs) p.kill("SIGKILL");
  hub?.proc?.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
}

await runBench("hub-deploy", main, cleanup);
