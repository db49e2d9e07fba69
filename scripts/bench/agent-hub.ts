// Real agent → real hub: how long a pod status change on the device takes to be visible in the
// hub's API. A pod with an exec readiness probe on /tmp/ready is flipped ready/unready by exec;
// each round times from the moment the agent's local API shows the new Ready condition to the
// moment the hub's GET /api/v1/pods shows it (both polled every 5 ms). Needs root and the test bed.
//   node_modules/.bin/bun scripts/bench/agent-hub.ts [--rounds N]   (default 20)
import type { Pod } from "../../src/api/types.ts";
import { TestAgent } from "../../test/lib/agent.ts";
import { TestHub } from "../../test/lib/hub.ts";

const roundsArg = process.argv.indexOf("--rounds");
const rounds = roundsArg > 0 ? Number(process.argv[roundsArg + 1]) : 20;
if (!Number.isInteger(rounds) || rounds < 1) {
  console.error("usage: agent-hub.ts [--rounds N]");
  process.exit(2);
}

const ready = (p: Pod | undefined) =>
  p?.status?.conditions?.find((c) => c.type === "Ready")?.status === "True";

async function until<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 20_000) {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined) return { value: v, at: performance.now() };
    await Bun.sleep(5);
  }
  throw new Error(`timed out waiting for ${what}`);
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? Number.NaN;
}

const hub = new TestHub();
const args: string[] = [];
const agent = new TestAgent({ args });
const podName = () => `flip-${agent.nodeName}`;
try {
  await hub.start();
  args.push("--hub", hub.url, "--join-token", await hub.joinToken());
  await agent.start();
  agent.writeManifest(
    "flip.yaml",
    `apiVersion: v1
kind: Pod
metadata:
  name: flip
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: main
      image: ${agent.tb.busybox}
      command: ["sh", "-c", "sleep 3600"]
      readinessProbe: { exec: { command: ["cat", "/tmp/ready"] }, periodSeconds: 1, failureThreshold: 1, successThreshold: 1 }
`,
  );
  await agent.waitPod("flip", "Running", (p) => p.status?.phase === "Running", 60_000);
  const hubPod = async () => {
    const res = await hub.api(`/api/v1/pods?nodeName=${agent.nodeName}`);
    const list = (await res.json()) as { items: Pod[] };
    return list.items.find((p) => p.metadata.name === podName());
  };
  const samples: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const want = i % 2 === 0;
    const cmd = want ? "touch /tmp/ready" : "rm -f /tmp/ready";
    const r = agent.cli(["exec", podName(), "--", "sh", "-c", cmd]);
    if (r.code !== 0) throw new Error(`exec failed: ${r.stderr}`);
    const local = await until("the local API", async () => {
      const p = await agent.pod("flip");
      return ready(p) === want ? p : undefined;
    });
    const remote = await until("the hub API", async () => {
      const p = await hubPod();
      return ready(p) === want ? p : undefined;
    });
    samples.push(remote.at - local.at);
  }
  const p50 = pct(samples, 50);
  console.log(`rounds ${rounds}`);
  console.log(
    `device → hub API latency ms: p50 ${p50.toFixed(1)}  p90 ${pct(samples, 90).toFixed(1)}  max ${Math.max(...samples).toFixed(1)}`,
  );
  console.log(`p50 <= 200 ms: ${p50 <= 200 ? "yes" : "no"}`);
} catch (err) {
  console.error(`agent-hub benchmark failed: ${(err as Error).message}`);
  process.exitCode = 1;
} finally {
  await agent.cleanup();
  await hub.cleanup();
}
