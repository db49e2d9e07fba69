// Probes end to end: the compiled agent, the test bed's containerd, busybox pods, and servers of
// our own on loopback (HTTPS, gRPC health) probed from host-network pods. Every pod is written at
// the start so that they run side by side; each test then watches its own pod. Needs root and
// the test bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Event, Pod } from "../../src/api/types.ts";
import { TestAgent } from "../lib/agent.ts";
import {
  type GRPCHealthServer,
  type HTTPProbeServer,
  selfSignedCert,
  startGRPCHealthServer,
  startHTTPProbeServer,
} from "../lib/probe-servers.ts";
import { eventually } from "../lib/testbed.ts";

const agent = new TestAgent();
const img = agent.tb.busybox;
let https: HTTPProbeServer;
let grpc: GRPCHealthServer;

const exec = (cmd: string) => `exec: { command: ["sh", "-c", ${JSON.stringify(cmd)}] }`;

function pod(name: string, script: string, probes: string, extra = ""): string {
  return `apiVersion: v1
kind: Pod
metadata:
  name: ${name}
spec:
  terminationGracePeriodSeconds: 1
${extra}  containers:
    - name: c
      image: ${img}
      command: ["sh", "-c", ${JSON.stringify(script)}]
${probes
  .split("\n")
  .map((l) => `      ${l}`)
  .join("\n")}
`;
}

function manifests(): Record<string, string> {
  const fast = "periodSeconds: 1";
  const hostNet = "  hostNetwork: true\n";
  return {
    "ready-delay": pod(
      "ready-delay",
      "touch /tmp/ready; sleep 600",
      `readinessProbe: { ${exec("cat /tmp/ready")}, initialDelaySeconds: 5, ${fast}, timeoutSeconds: 5 }`,
    ),
    "ready-never": pod("ready-never", "sleep 600", `readinessProbe: { ${exec("false")}, ${fast} }`),
    "live-cat": pod(
      "live-cat",
      "echo ok >/tmp/health; sleep 3; rm -f /tmp/health; sleep 600",
      `livenessProbe: { exec: { command: ["cat", "/tmp/health"] }, initialDelaySeconds: 1, ${fast}, failureThreshold: 1 }`,
    ),
    "live-tcp": pod(
      "live-tcp",
      "mkdir -p /www && httpd -f -p 8080 -h /www",
      `livenessProbe: { tcpSocket: { port: 8080 }, initialDelaySeconds: 1, ${fast}, timeoutSeconds: 5 }`,
    ),
    "live-count": pod(
      "live-count",
      "sleep 600",
      `livenessProbe: { ${exec("false")}, ${fast}, failureThreshold: 1 }`,
    ),
    "live-timeout": pod(
      "live-timeout",
      "sleep 600",
      `livenessProbe: { ${exec("sleep 10")}, initialDelaySeconds: 1, timeoutSeconds: 1, ${fast}, failureThreshold: 1 }`,
    ),
    "ready-timeout": pod(
      "ready-timeout",
      "sleep 600",
      `readinessProbe: { ${exec("sleep 10")}, timeoutSeconds: 1, ${fast}, failureThreshold: 1 }`,
    ),
    "startup-fail": pod(
      "startup-fail",
      "sleep 600",
      `startupProbe: { ${exec("false")}, ${fast}, failureThreshold: 2 }`,
    ),
    "startup-holds": pod(
      "startup-holds",
      "sleep 600",
      `livenessProbe: { ${exec("false")}, ${fast}, failureThreshold: 1 }\nstartupProbe: { ${exec("false")}, ${fast}, failureThreshold: 60 }`,
    ),
    "startup-ready": pod(
      "startup-ready",
      "sleep 3; touch /tmp/startup; sleep 600",
      `readinessProbe: { ${exec("true")}, periodSeconds: 60 }\nstartupProbe: { ${exec("cat /tmp/startup")}, ${fast}, failureThreshold: 60 }`,
    ),
    "probe-grace": pod(
      "probe-grace",
      "trap '' TERM; sleep 2; while true; do sleep 1; done",
      `livenessProbe: { ${exec("false")}, initialDelaySeconds: 2, ${fast}, failureThreshold: 1, terminationGracePeriodSeconds: 2 }`,
    ).replace("terminationGracePeriodSeconds: 1\n", "terminationGracePeriodSeconds: 600\n"),
    terminating: pod(
      "terminating",
      "trap 'rm -f /tmp/ready /tmp/live; sleep 6; exit 0' TERM; touch /tmp/ready /tmp/live; while true; do sleep 1; done",
      `readinessProbe: { ${exec("cat /tmp/ready")}, ${fast}, timeoutSeconds: 5, failureThreshold: 1 }\nlivenessProbe: { ${exec("cat /tmp/live")}, ${fast}, timeoutSeconds: 5, failureThreshold: 1 }`,
    ).replace("terminationGracePeriodSeconds: 1\n", "terminationGracePeriodSeconds: 10\n"),
    "http-pod": pod(
      "http-pod",
      "mkdir -p /www && echo ok >/www/healthz && httpd -f -p 8080 -h /www",
      `ports: [{ name: http, containerPort: 8080 }]\nreadinessProbe: { httpGet: { port: 8080, path: /healthz }, ${fast}, timeoutSeconds: 5 }\nlivenessProbe: { httpGet: { port: http, path: /healthz }, ${fast}, timeoutSeconds: 5 }`,
    ),
    "http-badport": pod(
      "http-badport",
      "sleep 600",
      `readinessProbe: { httpGet: { port: nope, path: / }, ${fast} }`,
    ),
    "https-headers": pod(
      "https-headers",
      "sleep 600",
      `readinessProbe: { httpGet: { scheme: HTTPS, port: ${https.port}, path: /header/X-Token/abc, httpHeaders: [{ name: X-Token, value: abc }] }, ${fast} }`,
      hostNet,
    ),
    "grpc-ok": pod(
      "grpc-ok",
      "sleep 600",
      `readinessProbe: { grpc: { port: ${grpc.port} }, ${fast} }`,
      hostNet,
    ),
    "grpc-down": pod(
      "grpc-down",
      "sleep 600",
      `livenessProbe: { grpc: { port: ${grpc.port}, service: down }, initialDelaySeconds: 1, ${fast}, failureThreshold: 1 }`,
      hostNet,
    ),
  };
}

const cStatus = (p: Pod) => p.status?.containerStatuses?.find((c) => c.name === "c");
const restarts = (p: Pod) => cStatus(p)?.restartCount ?? 0;
const condition = (p: Pod, type: string) => p.status?.conditions?.find((c) => c.type === type);
const running = (p: Pod) => cStatus(p)?.state?.running !== undefined;

async function events(name: string): Promise<Event[]> {
  const res = await agent.request("/api/v1/events");
  const list = (await res.json()) as { items: Event[] };
  return list.items.filter((e) => e.involvedObject.name === `${name}-${agent.nodeName}`);
}

function eventWith(name: string, reason: string, text: string, timeoutMs = 30_000) {
  return eventually(
    `a ${reason} event of ${name} containing ${JSON.stringify(text)}`,
    async () => (await events(name)).find((e) => e.reason === reason && e.message.includes(text)),
    timeoutMs,
    250,
  );
}

/** The pod as it stays for `ms`: fails as soon as `ok` does not hold. */
async function holds(name: string, ms: number, ok: (p: Pod) => boolean): Promise<Pod> {
  const until = Date.now() + ms;
  let last: Pod | undefined;
  while (Date.now() < until) {
    last = await agent.pod(name);
    if (last === undefined || !ok(last))
      throw new Error(`pod ${name}: ${JSON.stringify(last?.status)}`);
    await Bun.sleep(300);
  }
  return last as Pod;
}

beforeAll(async () => {
  https = startHTTPProbeServer(selfSignedCert());
  grpc = await startGRPCHealthServer();
  grpc.statuses.set("down", 2);
  await agent.start();
  for (const [name, text] of Object.entries(manifests())) agent.writeManifest(`${name}.yaml`, text);
}, 30_000);

afterAll(async () => {
  await agent.cleanup();
  https?.stop();
  await grpc?.stop();
}, 90_000);

describe("probes through the compiled agent (needs root and the test bed)", () => {
  test("a readiness probe is not ready before its initial delay, then ready, never restarted", async () => {
    const p = await agent.waitPod(
      "ready-delay",
      "Ready",
      (x) => condition(x, "Ready")?.status === "True",
      120_000,
    );
    const started = Date.parse(cStatus(p)?.state?.running?.startedAt ?? "");
    const ready = Date.parse(condition(p, "Ready")?.lastTransitionTime ?? "");
    expect(ready - started).toBeGreaterThanOrEqual(5_000);
    expect(restarts(p)).toBe(0);
  }, 150_000);

  test("a failing readiness probe keeps the container not ready and never restarts it", async () => {
    await agent.waitPod("ready-never", "running", running, 60_000);
    await eventWith("ready-never", "Unhealthy", "Readiness probe failed");
    const p = await holds(
      "ready-never",
      4_000,
      (x) => cStatus(x)?.ready === false && restarts(x) === 0,
    );
    expect(condition(p, "ContainersReady")?.status).toBe("False");
  }, 90_000);

  test("an exec `cat /tmp/health` liveness probe restarts the container once the file is gone", async () => {
    await agent.waitPod("live-cat", "restarted", (x) => restarts(x) >= 1, 60_000);
    await eventWith(
      "live-cat",
      "Unhealthy",
      "Liveness probe failed: cat: can't open '/tmp/health'",
    );
    await eventWith("live-cat", "Killing", "Container c failed liveness probe, will be restarted");
  }, 90_000);

  test("a passing tcpSocket liveness probe never restarts the container", async () => {
    await agent.waitPod("live-tcp", "running", running, 60_000);
    await holds("live-tcp", 6_000, (x) => restarts(x) === 0 && running(x));
  }, 90_000);

  test("liveness restarts raise the restart count monotonically", async () => {
    const seen: number[] = [];
    await agent.waitPod(
      "live-count",
      "restarted 3 times",
      (x) => {
        seen.push(restarts(x));
        return restarts(x) >= 3;
      },
      90_000,
    );
    for (let i = 1; i < seen.length; i++)
      expect(seen[i] as number).toBeGreaterThanOrEqual(seen[i - 1] as number);
  }, 120_000);

  test("an exec liveness probe that times out restarts the container", async () => {
    await agent.waitPod("live-timeout", "restarted", (x) => restarts(x) >= 1, 60_000);
    await eventWith(
      "live-timeout",
      "Unhealthy",
      'Liveness probe failed: command "sh -c sleep 10" timed out',
    );
  }, 90_000);

  test("an exec readiness probe that times out keeps the container not ready", async () => {
    await agent.waitPod("ready-timeout", "running", running, 60_000);
    await eventWith("ready-timeout", "Unhealthy", "timed out");
    await holds("ready-timeout", 3_000, (x) => cStatus(x)?.ready === false && restarts(x) === 0);
  }, 90_000);

  test("a failing startup probe restarts the container", async () => {
    await agent.waitPod("startup-fail", "restarted", (x) => restarts(x) >= 1, 60_000);
    await eventWith(
      "startup-fail",
      "Killing",
      "Container c failed startup probe, will be restarted",
    );
  }, 90_000);

  test("a pending startup probe keeps a failing liveness probe from restarting the container", async () => {
    await agent.waitPod("startup-holds", "running", running, 60_000);
    const p = await holds("startup-holds", 6_000, (x) => restarts(x) === 0);
    expect(cStatus(p)?.started).toBe(false);
    expect((await events("startup-holds")).some((e) => e.message.startsWith("Liveness"))).toBe(
      false,
    );
  }, 90_000);

  test("a container is ready right after its startup probe succeeds, not a readiness period later", async () => {
    const p = await agent.waitPod(
      "startup-ready",
      "Ready",
      (x) => cStatus(x)?.ready === true,
      40_000,
    );
    expect(cStatus(p)?.started).toBe(true);
  }, 90_000);

  test("a liveness probe's terminationGracePeriodSeconds overrides the pod's 600 s", async () => {
    await agent.waitPod("probe-grace", "restarted", (x) => restarts(x) >= 1, 40_000);
  }, 90_000);

  test("httpGet by port number and by port name against a server in the pod", async () => {
    await agent.waitPod("http-pod", "Ready", (x) => cStatus(x)?.ready === true, 60_000);
    await holds("http-pod", 3_000, (x) => restarts(x) === 0 && cStatus(x)?.ready === true);
  }, 90_000);

  test("a probe naming a port that does not exist fails with a message and never readies", async () => {
    await eventWith("http-badport", "Unhealthy", '"nope"');
    const p = await agent.pod("http-badport");
    expect(p && cStatus(p)?.ready).toBe(false);
  }, 90_000);

  test("httpGet over HTTPS with a self-signed certificate and headers, from a host-network pod", async () => {
    await agent.waitPod("https-headers", "Ready", (x) => cStatus(x)?.ready === true, 60_000);
    expect(https.seen.some((r) => r.headers["x-token"] === "abc")).toBe(true);
  }, 90_000);

  test("grpc health checks: SERVING readies the pod, NOT_SERVING fails liveness and restarts", async () => {
    await agent.waitPod("grpc-ok", "Ready", (x) => cStatus(x)?.ready === true, 60_000);
    await agent.waitPod("grpc-down", "restarted", (x) => restarts(x) >= 1, 60_000);
    await eventWith("grpc-down", "Unhealthy", 'service unhealthy (responded with "NOT_SERVING")');
  }, 90_000);

  test("describe pod shows the probes and their failures", async () => {
    const r = agent.cli(["describe", "pod", `live-cat-${agent.nodeName}`]);
    expect(r.stdout).toMatch(
      /Liveness:\s+exec \[cat \/tmp\/health\] delay=1s timeout=1s period=1s #success=1 #failure=1/,
    );
    expect(r.stdout).toContain("Liveness probe failed");
  });

  test("while a pod terminates its liveness probe is off (no failure though the file is gone)", async () => {
    await agent.waitPod("terminating", "Ready", (x) => cStatus(x)?.ready === true, 60_000);
    const removedAt = Math.floor(Date.now() / 1000) * 1000;
    agent.removeManifest("terminating.yaml");
    await eventually(
      "the terminating pod to be gone",
      async () => (await agent.pod("terminating")) === undefined,
      30_000,
    );
    await Bun.sleep(3_000);
    // Only what happened after the removal counts (a restart earlier, on a loaded machine, is not
    // what this is about).
    const late = (await events("terminating")).filter(
      (e) =>
        Date.parse(e.lastTimestamp) >= removedAt &&
        (e.message.includes("can't open '/tmp/live'") ||
          e.message.includes("failed liveness probe")),
    );
    expect(late).toEqual([]);
  }, 90_000);
});
