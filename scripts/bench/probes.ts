// Probes at scale: the compiled agent runs N pods (default 50), each probed every second by
// liveness and readiness probes cycling through exec, httpGet and tcpSocket (pod i uses kind
// i % 3), against a busybox httpd in the pod. Once every pod is ready, it measures over a window
// (default 30 s): the agent's CPU (% of one core) and RSS, and the delay from each probe's
// scheduled time to its run (p50/p99/max from the agent's fleetlet_prober_probe_delay_seconds).
//
//   node_modules/.bin/bun scripts/bench/probes.ts [--pods N] [--window S] [--bin PATH]   (needs
//   root, the test bed and a built dist/fleetlet; --bin: another build to measure)
//
// Everything runs under a TestAgent with its own node name; its pods are removed at the end.

import { TestAgent } from "../../test/lib/agent.ts";
import { eventually } from "../../test/lib/testbed.ts";
import { cpuTicks, rssMB } from "./agent-common.ts";

function arg(name: string, def: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const v = i < 0 ? def : Number(process.argv[i + 1]);
  if (!Number.isInteger(v) || v < 1) {
    console.error(`probes: --${name} needs a positive integer, got ${process.argv[i + 1]}`);
    process.exit(2);
  }
  return v;
}

const HANDLERS = [
  (p: string) => `exec: { command: ["true"] }, ${p}`,
  (p: string) => `httpGet: { port: 8080, path: /healthz }, ${p}`,
  (p: string) => `tcpSocket: { port: 8080 }, ${p}`,
];

function manifest(name: string, image: string, i: number): string {
  const h = HANDLERS[i % 3] as (p: string) => string;
  const timing = "periodSeconds: 1, timeoutSeconds: 5, failureThreshold: 5";
  return `apiVersion: v1
kind: Pod
metadata:
  name: ${name}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: c
      image: ${image}
      command: ["sh", "-c", "mkdir -p /www && echo ok >/www/healthz && exec httpd -f -p 8080 -h /www"]
      livenessProbe: { ${h(timing)} }
      readinessProbe: { ${h(timing)} }
`;
}

async function metric(agent: TestAgent, re: RegExp): Promise<number> {
  const text = await (await agent.request("/metrics")).text();
  const m = re.exec(text);
  return m ? Number(m[1]) : Number.NaN;
}

async function main() {
  const pods = arg("pods", 50);
  const windowS = arg("window", 30);
  const at = process.argv.indexOf("--bin");
  const agent = new TestAgent(at < 0 ? {} : { bin: process.argv[at + 1] as string });
  const stop = async () => {
    await agent.cleanup();
  };
  process.on("SIGINT", () => void stop().then(() => process.exit(130)));
  try {
    await agent.start();
    for (let i = 0; i < pods; i++) {
      agent.writeManifest(`p${i}.yaml`, manifest(`p${i}`, agent.tb.busybox, i));
    }
    const t0 = Date.now();
    await eventually(
      `${pods} pods ready`,
      async () => {
        const list = await agent.pods();
        const ready = list.filter((p) => p.status?.containerStatuses?.[0]?.ready).length;
        return ready === pods;
      },
      600_000,
      1000,
    );
    console.log(`all ${pods} pods ready after ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    await Bun.sleep(10_000); // settle, and let the delay window fill with steady-state runs
    const pid = agent.proc?.pid as number;
    const runs0 = await metric(
      agent,
      /fleetlet_prober_probes_total\{[^}]*result="success"\} (\d+)/g,
    );
    const ticks0 = cpuTicks(pid);
    const started = Date.now();
    const rss: number[] = [];
    while (Date.now() - started < windowS * 1000) {
      rss.push(rssMB(pid));
      await Bun.sleep(1000);
    }
    const cpu = ((cpuTicks(pid) - ticks0) / 100 / ((Date.now() - started) / 1000)) * 100;
    const text = await (await agent.request("/metrics")).text();
    const q = (quantile: string) =>
      Number(
        new RegExp(`fleetlet_prober_probe_delay_seconds\\{quantile="${quantile}"\\} (\\S+)`).exec(
          text,
        )?.[1],
      ) * 1000;
    const failures = [
      ...text.matchAll(/fleetlet_prober_probes_total\{[^}]*result="failure"\} (\d+)/g),
    ]
      .map((m) => Number(m[1]))
      .reduce((a, b) => a + b, 0);
    console.log(`probes: ${pods * 2} workers at periodSeconds 1 (exec, httpGet, tcpSocket by pod)`);
    console.log(`agent CPU: ${cpu.toFixed(1)} % of one core over ${windowS} s`);
    console.log(
      `agent RSS: ${Math.max(...rss).toFixed(1)} MB max, ${rss[rss.length - 1]?.toFixed(1)} MB last`,
    );
    console.log(
      `delay due→run (last 4096 runs): p50 ${q("0.5").toFixed(1)} ms, p99 ${q("0.99").toFixed(1)} ms, max ${q("1").toFixed(1)} ms`,
    );
    console.log(`failed probe runs so far: ${failures}; first success counter seen: ${runs0}`);
    console.log(`p99 delay <= 100 ms: ${q("0.99") <= 100 ? "yes" : "no"}`);
  } finally {
    await stop();
  }
}

await main();
