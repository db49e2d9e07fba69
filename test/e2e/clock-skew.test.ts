// Devices with wrong clocks (issue 30): the compiled agent runs under libfaketime, its wall clock
// hours behind, at 1970 and hours ahead of the hub's, and stepped while it runs (the monotonic
// clock is left alone, as on a real board). It joins a TLS hub with a join token, its pods run,
// the hub shows its clock skew, and a wall step neither restarts a healthy pod, nor stops or
// hurries its probes, nor changes a crash loop's pace. Needs root, the test bed and libfaketime.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseDuration } from "../../src/api/duration.ts";
import type { Node } from "../../src/api/node.ts";
import type { Pod } from "../../src/api/types.ts";
import { issue } from "../../src/hub/tls/certs.ts";
import { HUB_ANNOTATIONS } from "../../src/protocol/index.ts";
import { TestAgent } from "../lib/agent.ts";
import { TestHub } from "../lib/hub.ts";
import { eventually } from "../lib/testbed.ts";

const LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
const HOUR = 3_600_000;
const fast = ["--hub-reconnect-back-off-base", "200ms", "--hub-reconnect-back-off-max", "1s"];

const hub = new TestHub(["--heartbeat-interval", "1s"], "127.0.0.1", true);
const agents: TestAgent[] = [];

/** An agent whose wall clock is the real one plus the offset in its faketime file. */
class SkewedAgent {
  readonly agent: TestAgent;
  private readonly file: string;

  constructor(args: string[], offsetMs: number) {
    const env = {
      LD_PRELOAD: LIBFAKETIME,
      DONT_FAKE_MONOTONIC: "1",
      FAKETIME_NO_CACHE: "1",
      FAKETIME_TIMESTAMP_FILE: "",
    };
    this.agent = new TestAgent({ args: [...fast, ...args], env });
    this.file = join(this.agent.dir, "faketime");
    env.FAKETIME_TIMESTAMP_FILE = this.file;
    this.set(offsetMs);
    agents.push(this.agent);
  }

  /** Sets the agent's clock to the real one plus `offsetMs` (read at its next clock reading). */
  set(offsetMs: number): void {
    const s = Math.round(offsetMs / 1000);
    writeFileSync(this.file, `${s >= 0 ? "+" : ""}${s}\n`);
  }
}

/** The offset that puts a clock at `at` now. */
const toTime = (at: number) => at - Date.now();

async function hubNode(name: string): Promise<Node | undefined> {
  const res = await hub.api(`/api/v1/nodes/${name}`);
  return res.status === 200 ? ((await res.json()) as Node) : undefined;
}

async function hubPod(node: string, name: string): Promise<Pod | undefined> {
  const res = await hub.api(`/api/v1/pods?nodeName=${node}`);
  if (res.status !== 200) return undefined;
  const { items } = (await res.json()) as { items: Pod[] };
  return items.find((p) => p.metadata.name === `${name}-${node}`);
}

const restarts = (p: Pod | undefined) => p?.status?.containerStatuses?.[0]?.restartCount ?? 0;

function sleeper(name: string, img: string): string {
  return `apiVersion: v1
kind: Pod
metadata: { name: ${name} }
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: c
      image: ${img}
      command: ["sleep", "3600"]
`;
}

beforeAll(async () => {
  if (!existsSync(LIBFAKETIME))
    throw new Error(`${LIBFAKETIME} is missing: install the package libfaketime`);
  await hub.start();
}, 30_000);
afterAll(async () => {
  for (const a of agents) await a.cleanup();
  await hub.cleanup();
}, 120_000);

describe("devices with wrong clocks (needs root, the test bed and libfaketime)", () => {
  test("the faked clock reaches the agent's TLS: 3 hours behind, it refuses a hub certificate made a minute ago", async () => {
    const now = Date.now();
    const ca = issue({ commonName: "recent-ca", notBefore: now - 60_000, notAfter: now + HOUR });
    const serving = issue({
      commonName: "hub",
      notBefore: now - 60_000,
      notAfter: now + HOUR,
      sans: ["127.0.0.1", "localhost"],
      issuer: { commonName: "recent-ca", key: ca.key, publicKey: ca.publicKey },
    });
    const dir = mkdtempSync(join(tmpdir(), "fleetlet-given-tls-"));
    for (const [f, text] of [
      ["ca.crt", ca.certPem],
      ["tls.crt", serving.certPem],
      ["tls.key", serving.keyPem],
    ] as const)
      writeFileSync(join(dir, f), text, { mode: 0o600 });
    const given = ["--tls-cert", "tls.crt", "--tls-key", "tls.key", "--tls-ca", "ca.crt"];
    const other = new TestHub(
      given.map((v, i) => (i % 2 === 1 ? join(dir, v) : v)),
      "127.0.0.1",
      true,
    );
    try {
      await other.start();
      const res = await fetch(`${other.url}/api/v1/join-tokens`, {
        method: "POST",
        headers: { authorization: `Bearer ${other.operatorToken}` },
        body: "{}",
        tls: { ca: ca.certPem },
      } as RequestInit);
      expect(res.status).toBe(201);
      const { token } = (await res.json()) as { token: string };
      const a = new SkewedAgent(["--hub", other.url, "--join-token", token], -3 * HOUR);
      await a.agent.start();
      await eventually(
        "the agent to refuse the hub's certificate as not yet valid",
        () => /not yet valid|CERT_NOT_YET_VALID/i.test(a.agent.output),
        20_000,
        100,
      );
      expect(existsSync(join(a.agent.rootDir, "hub", "credential"))).toBe(false);
      await a.agent.stop("SIGKILL");
    } finally {
      await other.cleanup();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  test.each([
    ["3 hours behind", -3 * HOUR],
    ["at 1970-01-01T01:00Z", toTime(HOUR)],
    ["5 hours ahead", 5 * HOUR],
  ])(
    "a device whose clock is %s joins the TLS hub with a join token, its pod runs, and the hub shows its skew",
    async (_name, offset) => {
      const token = await hub.joinToken();
      const a = new SkewedAgent(["--hub", hub.url, "--join-token", token], offset);
      a.agent.writeManifest("sleeper.yaml", sleeper("sleeper", a.agent.tb.busybox));
      await a.agent.start();
      const name = a.agent.nodeName;
      await eventually(
        "the pod running in the hub's view",
        async () => (await hubPod(name, "sleeper"))?.status?.phase === "Running",
        60_000,
        200,
      );
      const node = await eventually(
        "the node online in the hub with its clock skew",
        async () => {
          const n = await hubNode(name);
          const online = n?.metadata.annotations?.[HUB_ANNOTATIONS.online] === "true";
          return online && n?.metadata.annotations?.[HUB_ANNOTATIONS.clockSkew] ? n : undefined;
        },
        20_000,
        200,
      );
      const skew = parseDuration(node.metadata.annotations?.[HUB_ANNOTATIONS.clockSkew] ?? "");
      expect(Math.abs(skew - offset)).toBeLessThan(60_000);
      expect(node.status.conditions?.find((c) => c.type === "Ready")?.status).toBe("True");
      const list = await hub.api("/api/v1/nodes");
      expect(await list.text()).toContain(name);
      await a.agent.stop("SIGKILL");
      await a.agent.removeSandboxes();
    },
    120_000,
  );

  test("wall steps of hours back and forward: no extra restart of a healthy pod, its probes keep their pace, and a crash loop keeps its back-off", async () => {
    const token = await hub.joinToken();
    const a = new SkewedAgent(["--hub", hub.url, "--join-token", token], 2 * HOUR);
    const img = a.agent.tb.busybox;
    const probeDir = join(a.agent.dir, "probes");
    mkdirSync(probeDir);
    a.agent.writeManifest(
      "healthy.yaml",
      `apiVersion: v1
kind: Pod
metadata: { name: healthy }
spec:
  terminationGracePeriodSeconds: 1
  volumes: [{ name: p, hostPath: { path: ${probeDir}, type: Directory } }]
  containers:
    - name: c
      image: ${img}
      command: ["sleep", "3600"]
      volumeMounts: [{ name: p, mountPath: /p }]
      livenessProbe:
        exec: { command: ["sh", "-c", "echo x >> /p/probes"] }
        initialDelaySeconds: 2
        periodSeconds: 1
        failureThreshold: 1
`,
    );
    a.agent.writeManifest(
      "crasher.yaml",
      `apiVersion: v1
kind: Pod
metadata: { name: crasher }
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: c
      image: ${img}
      command: ["sh", "-c", "exit 1"]
`,
    );
    await a.agent.start();
    const probes = () => {
      const f = join(probeDir, "probes");
      return existsSync(f) ? readFileSync(f, "utf8").split("\n").length - 1 : 0;
    };
    // The back-off is at its cap (8 s in the test agent) after restarts at 1, 2, 4 and 8 s.
    await a.agent.waitPod("crasher", "at its back-off cap", (p) => restarts(p) >= 5, 90_000);
    await a.agent.waitPod("healthy", "probed", () => probes() >= 3, 30_000);

    for (const [step, offset] of [
      ["back 5 hours", -3 * HOUR],
      ["forward 9 hours", 6 * HOUR],
    ] as const) {
      const crashBefore = restarts(await a.agent.pod("crasher"));
      const probesBefore = probes();
      a.set(offset);
      const t0 = performance.now();
      await Bun.sleep(25_000);
      const seconds = (performance.now() - t0) / 1000;
      const healthy = await a.agent.pod("healthy");
      const crasher = await a.agent.pod("crasher");
      const probed = probes() - probesBefore;
      const crashed = restarts(crasher) - crashBefore;
      const what = `after a wall step ${step}: ${probed} probes and ${crashed} restarts of the crash loop in ${seconds.toFixed(1)} s`;
      expect({ what, restarts: restarts(healthy) }).toEqual({ what, restarts: 0 });
      // One probe a second: neither stopped nor hurried.
      expect({ what, ok: probed >= seconds * 0.6 && probed <= seconds * 1.4 }).toEqual({
        what,
        ok: true,
      });
      // One restart per 8 s back-off (plus the time the container takes to exit): 2 or 3 in 25 s.
      expect({ what, ok: crashed >= 2 && crashed <= 4 }).toEqual({ what, ok: true });
    }
    const node = await hubNode(a.agent.nodeName);
    const skew = parseDuration(node?.metadata.annotations?.[HUB_ANNOTATIONS.clockSkew] ?? "0s");
    expect(Math.abs(skew - 6 * HOUR)).toBeLessThan(60_000);
  }, 240_000);
});
