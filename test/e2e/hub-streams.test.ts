// Logs, exec and port-forward through the hub, with the compiled hub (HTTPS, its own CA), a real
// agent and containerd: first kubectl 1.32 from the machine against the hub, then the same paths
// through `fleetlet ... --hub` (which always run), the local interactive exec, the audit log,
// security, bad stream input from a client and from a device, the per-device cap, and a device
// going offline. Needs root and the test bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Node } from "../../src/api/node.ts";
import type { Event, Pod } from "../../src/api/types.ts";
import { TestAgent } from "../lib/agent.ts";
import { ProtocolClient, TestHub } from "../lib/hub.ts";
import { Background, run, underPty } from "../lib/processes.ts";
import { eventually, fleetletBin } from "../lib/testbed.ts";

const hub = new TestHub(
  ["--heartbeat-interval", "1s", "--max-streams-per-node", "4"],
  "127.0.0.1",
  true,
);
const agentArgs = [
  "--hub-reconnect-back-off-base",
  "200ms",
  "--hub-reconnect-back-off-max",
  "1s",
  "--node-status-update-frequency",
  "1s",
];
const agent = new TestAgent({ args: agentArgs });
const kubectl = Bun.which("kubectl");
let env: Record<string, string> = {};
const pod = () => `web-${agent.nodeName}`;

const manifest = (img: string) => `apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: main
      image: ${img}
      command: ["sh", "-c", "i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.3; done"]
    - name: http
      image: ${img}
      command: ["httpd", "-f", "-p", "8080", "-h", "/etc"]
    - name: crash
      image: ${img}
      command: ["sh", "-c", "echo run $(cat /proc/uptime); sleep 1; exit 1"]
`;

beforeAll(async () => {
  await hub.start();
  const kubeconfig = join(hub.dataDir, "kubeconfig");
  const kc = await run([fleetletBin, "hub", "kubeconfig", "--hub", hub.url, "--data", hub.dataDir]);
  if (kc.code !== 0) throw new Error(`hub kubeconfig: ${kc.stderr}`);
  writeFileSync(kubeconfig, kc.stdout);
  env = {
    KUBECONFIG: kubeconfig,
    FLEETLET_HUB_TOKEN: hub.operatorToken,
    FLEETLET_HUB_CA: join(hub.dataDir, "tls", "ca.crt"),
  };
  agentArgs.push("--hub", hub.url, "--join-token", await hub.joinToken());
  agent.writeManifest("web.yaml", manifest(agent.tb.busybox));
  await agent.start();
  await eventually(
    "the pod running in the hub, its crash container restarted once",
    async () => {
      const p = (await hubJson<Pod>(`/api/v1/namespaces/default/pods/${pod()}`)) as Pod | undefined;
      const crash = p?.status?.containerStatuses?.find((c) => c.name === "crash");
      return p?.status?.containerStatuses?.find((c) => c.name === "main")?.state.running !==
        undefined && (crash?.restartCount ?? 0) >= 1
        ? p
        : undefined;
    },
    40_000,
    200,
  );
}, 90_000);

afterAll(async () => {
  await agent.cleanup();
  await hub.cleanup();
}, 60_000);

async function hubJson<T>(path: string): Promise<T | undefined> {
  const res = await hub.api(path);
  return res.status === 200 ? ((await res.json()) as T) : undefined;
}

const kc = (...args: string[]) => run([kubectl ?? "kubectl", ...args], { env });
const fl = (...args: string[]) => run([fleetletBin, ...args, "--hub", hub.url], { env });

/** A device at the protocol level, announcing streams, with one pod `p-NAME`. */
async function fakeDevice(name: string) {
  const credential = await hub.credentialFor(name);
  const c = new ProtocolClient(hub.url, credential, hub.caPem);
  await c.opened;
  c.send({
    type: "hello",
    protocolVersion: 1,
    nodeName: name,
    agentVersion: "test",
    streamId: "s1",
    features: ["streams"],
  });
  await c.waitFor("welcome");
  const p = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: `p-${name}`, namespace: "default", uid: `u-${name}` },
    spec: { containers: [{ name: "c", image: "x" }] },
    status: { phase: "Running" },
  };
  c.send({ type: "pod.upsert", seq: 1, uid: `u-${name}`, pod: p });
  await eventually(
    "the fake pod in the hub",
    () => hubJson(`/api/v1/namespaces/default/pods/p-${name}`),
    5000,
    20,
  );
  return c;
}
const logsOf = (name: string) =>
  hub.api(`/api/v1/namespaces/default/pods/p-${name}/log?follow=true`);

describe.skipIf(kubectl === null)(
  "kubectl 1.32 against the hub (needs root and the test bed; skipped where kubectl is not installed: the fleetlet --hub tests below cover the same paths)",
  () => {
    test("get nodes, get pods -A -o wide, get events and describe pod show what the hub's API returns", async () => {
      const node = (await hubJson<Node>(`/api/v1/nodes/${agent.nodeName}`)) as Node;
      const nodes = await kc("get", "nodes");
      expect(nodes.stdout).toMatch(
        new RegExp(
          `^NAME\\s+STATUS\\s+ROLES\\s+AGE\\s+VERSION\\n${agent.nodeName}\\s+Ready\\s+<none>\\s+\\S+\\s+${node.status.nodeInfo?.kubeletVersion}`,
          "m",
        ),
      );
      const p = (await hubJson<Pod>(`/api/v1/namespaces/default/pods/${pod()}`)) as Pod;
      const wide = await kc("get", "pods", "-A", "-o", "wide");
      expect(wide.stdout).toMatch(
        /^NAMESPACE\s+NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\s+IP\s+NODE\s+NOMINATED NODE\s+READINESS GATES$/m,
      );
      expect(wide.stdout).toMatch(
        new RegExp(
          `^default\\s+${pod()}\\s+\\d/3\\s+\\S+\\s+.*${p.status?.podIP}\\s+${agent.nodeName}\\s+<none>\\s+<none>$`,
          "m",
        ),
      );
      const events = (await hubJson<{ items: Event[] }>("/api/v1/events"))?.items ?? [];
      const started = events.find((e) => e.reason === "Started" && e.involvedObject.name === pod());
      const ev = await kc("get", "events", "-A");
      expect(ev.stdout).toContain(`pod/${pod()}`);
      expect(ev.stdout).toContain(started?.message ?? "<no Started event>");
      const described = await kc("describe", "pod", pod());
      expect(described.stdout).toContain(`Node:         ${agent.nodeName}/`);
      expect(described.stdout).toMatch(/Containers:\n {2}main:/);
      expect(described.stdout).toMatch(
        new RegExp(`Normal\\s+Started\\s+\\S+\\s+fleetlet\\s+${started?.message}`),
      );
    });

    test("get pods -w sees a pod change", async () => {
      const watch = new Background([kubectl as string, "get", "pods", "-w"], env);
      try {
        await watch.waitFor(new RegExp(pod()), "the pod in the watch");
        agent.writeManifest(
          "late.yaml",
          `apiVersion: v1\nkind: Pod\nmetadata: {name: late}\nspec:\n  containers: [{name: c, image: ${agent.tb.busybox}, command: ["sleep", "3600"]}]\n`,
        );
        await watch.waitFor(
          new RegExp(`late-${agent.nodeName}\\s+1/1\\s+Running`),
          "the new pod running in the watch",
          30_000,
        );
      } finally {
        await watch.stop();
        agent.removeManifest("late.yaml");
      }
    }, 40_000);

    test("logs -f sees new lines as they are written; --previous shows the run before a restart", async () => {
      const follow = new Background(
        [kubectl as string, "logs", "-f", pod(), "-c", "main", "--tail", "1"],
        env,
      );
      try {
        const first = Number((await follow.waitFor(/tick (\d+)/, "a first line"))[1]);
        await follow.waitFor(new RegExp(`tick ${first + 3}\\b`), "three new lines");
      } finally {
        await follow.stop();
      }
      const prev = await kc("logs", pod(), "-c", "crash", "--previous");
      expect(prev.code).toBe(0);
      expect(prev.stdout).toMatch(/^run \d+\.\d+/);
      const cur = await kc("logs", pod(), "-c", "crash");
      expect(cur.stdout).not.toBe(prev.stdout);
    }, 30_000);

    test("exec -it runs a shell under a terminal, sees stdin and its size, and returns the exit code", async () => {
      const r = await underPty(
        `kubectl exec -it ${pod()} -c main -- sh`,
        [
          { after: /\/ # /, type: "stty size; read x; echo got:$x\r" },
          { after: /read x/, type: "hello\r" },
          { after: /got:hello/, type: "exit 7\r" },
        ],
        { env, cols: 120, rows: 40 },
      );
      expect(r.out).toContain("40 120");
      expect(r.out).toContain("got:hello");
      expect(r.out).toContain("command terminated with exit code 7");
      expect(r.code).toBe(7);
      const piped = await run(
        [kubectl as string, "exec", "-i", pod(), "-c", "main", "--", "sh", "-c", "cat; exit 3"],
        { env, stdin: "line 1\nline 2\n" },
      );
      expect(piped.stdout).toBe("line 1\nline 2\n");
      expect(piped.code).toBe(3);
    }, 30_000);

    test("logs of a pod on a device that is offline give a clear error", async () => {
      const dev = await fakeDevice("fake-k");
      dev.close();
      await dev.waitClosed();
      const r = await kc("logs", "p-fake-k");
      expect(r.code).toBe(1);
      expect(r.stderr.trim()).toBe(
        'Error from server (ServiceUnavailable): node "fake-k" is offline: its agent is not connected to the hub',
      );
    });

    test("exec of a missing container gets the API server's error", async () => {
      const r = await kc("exec", pod(), "-c", "nope", "--", "true");
      expect(r.code).toBe(1);
      expect(r.stderr.trim()).toBe(
        `Error from server (BadRequest): container nope is not valid for pod ${pod()}`,
      );
    });

    test("port-forward reaches httpd in the pod on the device", async () => {
      const pf = new Background([kubectl as string, "port-forward", `pod/${pod()}`, ":8080"], env);
      try {
        const port = (
          await pf.waitFor(/Forwarding from 127\.0\.0\.1:(\d+) -> 8080/, "the forward")
        )[1];
        for (let i = 0; i < 2; i++) {
          const res = await fetch(`http://127.0.0.1:${port}/hostname`);
          expect(await res.text()).toBe(`${pod()}\n`);
        }
      } finally {
        await pf.stop();
      }
    }, 30_000);

    test("apply (client-side and server-side) and label node", async () => {
      const file = join(hub.dataDir, "cm.yaml");
      writeFileSync(
        file,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: '1'}\n",
      );
      expect((await kc("apply", "-f", file)).stdout).toBe("configmap/settings created\n");
      writeFileSync(
        file,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: '2'}\n",
      );
      expect((await kc("apply", "-f", file)).stdout).toBe("configmap/settings configured\n");
      expect((await kc("apply", "--server-side", "-f", file)).stdout).toBe(
        "configmap/settings serverside-applied\n",
      );
      const cm = await hubJson<{ data: Record<string, string> }>(
        "/api/v1/namespaces/default/configmaps/settings",
      );
      expect(cm?.data).toEqual({ a: "2" });
      expect((await kc("label", "node", agent.nodeName, "site=kitchen")).stdout).toBe(
        `node/${agent.nodeName} labeled\n`,
      );
      const node = await hubJson<Node>(`/api/v1/nodes/${agent.nodeName}`);
      expect(node?.metadata.labels?.site).toBe("kitchen");
      expect((await kc("delete", "-f", file)).stdout).toBe('configmap "settings" deleted\n');
    });
  },
);

describe("fleetlet logs, exec and port-forward through the hub (needs root and the test bed)", () => {
  test("logs --hub follows new lines, shows --previous, and refuses a missing container as the API server does", async () => {
    const follow = new Background(
      [fleetletBin, "logs", "-f", pod(), "-c", "main", "--tail", "1", "--hub", hub.url],
      env,
    );
    try {
      const first = Number((await follow.waitFor(/tick (\d+)/, "a first line"))[1]);
      await follow.waitFor(new RegExp(`tick ${first + 3}\\b`), "three new lines");
    } finally {
      await follow.stop();
    }
    const prev = await fl("logs", pod(), "-c", "crash", "--previous");
    expect(prev.stdout).toMatch(/^run \d+\.\d+/);
    const bad = await fl("logs", pod(), "-c", "nope");
    expect(bad.stderr.trim()).toBe(
      `fleetlet: Error from server (BadRequest): container nope is not valid for pod ${pod()}`,
    );
  }, 30_000);

  test("exec -it --hub runs a shell under a terminal; exec -i passes stdin to its end; the exit code is ours", async () => {
    const r = await underPty(
      `${fleetletBin} exec -it ${pod()} -c main --hub ${hub.url} -- sh`,
      [
        { after: /\/ # /, type: "stty size; read x; echo got:$x\r" },
        { after: /read x/, type: "hi\r" },
        { after: /got:hi/, type: "exit 5\r" },
      ],
      { env, cols: 90, rows: 20 },
    );
    expect(r.out).toContain("20 90");
    expect(r.code).toBe(5);
    const piped = await run(
      [
        fleetletBin,
        "exec",
        "-i",
        pod(),
        "-c",
        "main",
        "--hub",
        hub.url,
        "--",
        "sh",
        "-c",
        "wc -l; exit 4",
      ],
      { env, stdin: "a\nb\nc\n" },
    );
    expect(piped.stdout.trim()).toBe("3");
    expect(piped.code).toBe(4);
  }, 30_000);

  test("exec -it on the device itself takes the same interactive path", async () => {
    const r = await underPty(
      `${fleetletBin} exec -it ${pod()} -c main --socket ${agent.socket} -- sh`,
      [{ after: /\/ # /, type: "stty size; exit 2\r" }],
      { env, cols: 70, rows: 10 },
    );
    expect(r.out).toContain("10 70");
    expect(r.code).toBe(2);
  }, 20_000);

  test("port-forward --hub reaches httpd in the pod; the audit log shows every exec and port-forward", async () => {
    const pf = new Background(
      [fleetletBin, "port-forward", pod(), "0:8080", "--hub", hub.url],
      env,
    );
    try {
      const port = (
        await pf.waitFor(/Forwarding from 127\.0\.0\.1:(\d+) -> 8080/, "the forward")
      )[1];
      const res = await fetch(`http://127.0.0.1:${port}/hostname`);
      expect(await res.text()).toBe(`${pod()}\n`);
    } finally {
      await pf.stop();
    }
    const audit = await fl("hub", "audit");
    expect(audit.stdout).toMatch(
      new RegExp(
        `exec\\s+${agent.nodeName}\\s+default/${pod()}\\s+main\\s+-t sh\\s+\\S+\\s+\\S+\\s+exit 5\\s+operator@127\\.0\\.0\\.1`,
      ),
    );
    expect(audit.stdout).toMatch(
      /portforward\s+\S+\s+\S+\s+-\s+ports 8080; 1 connections\s+\S+\s+\S+\s+closed/,
    );
  }, 30_000);

  test("security: no token is 401, a device's credential is 403 on the operator API and on exec", async () => {
    expect((await hub.api("/api/v1/pods", {}, "")).status).toBe(401);
    const credential = readFileSync(join(agent.rootDir, "hub", "credential"), "utf8").trim();
    const asDevice = await hub.api("/api/v1/pods", {}, credential);
    expect(asDevice.status).toBe(403);
    expect(((await asDevice.json()) as { message: string }).message).toContain(
      `the credential of node "${agent.nodeName}" cannot use the operator API`,
    );
    const r = await run(
      [
        fleetletBin,
        "exec",
        pod(),
        "-c",
        "main",
        "--hub",
        hub.url,
        "--token",
        credential,
        "--",
        "true",
      ],
      { env },
    );
    expect(r.stderr).toContain("Error from server (Forbidden)");
  });

  test("a malformed message from a client ends that exec only", async () => {
    const url = `${hub.url.replace(/^http/, "ws")}/api/v1/namespaces/default/pods/${pod()}/exec?command=sh&command=-c&command=sleep%2030&container=main&stdin=true`;
    const open = async () => {
      const { connectWebSocket } = await import("../../src/util/ws-client.ts");
      const ws = await connectWebSocket({
        url,
        protocols: ["v5.channel.k8s.io"],
        headers: { authorization: `Bearer ${hub.operatorToken}` },
        ca: hub.caPem,
      });
      const got: Uint8Array[] = [];
      ws.onMessage((d) => got.push(d));
      let closed = false;
      ws.onClose(() => {
        closed = true;
      });
      return { ws, got, closed: () => closed };
    };
    const bad = await open();
    const good = await open();
    bad.ws.send(Uint8Array.of(4, ...Buffer.from("not json")));
    await eventually("the bad exec to end", () => bad.closed(), 10_000, 20);
    const status = bad.got.find((m) => m[0] === 3);
    expect(Buffer.from(status?.subarray(1) ?? []).toString()).toContain(
      "the client sent a resize message that is not JSON",
    );
    expect(good.closed()).toBe(false);
    good.ws.send(Uint8Array.of(255, 0));
    good.ws.close();
  }, 20_000);
});

describe("streams against a protocol-level device (needs root and the test bed)", () => {
  test("a bad data frame from a device ends that stream only; the cap per device is 429; revoking ends the rest", async () => {
    const dev = await fakeDevice("fake-a");
    const data = (id: number, channel: number, text: string) =>
      dev.sendBinary(Uint8Array.of(1, 0, 0, 0, id, channel, ...Buffer.from(text)));
    /** A log stream the device accepts and starts with a line (the hub answers on the first). */
    const stream = async (n: number) => {
      const res = logsOf("fake-a");
      const open = (await eventually(
        `stream.open ${n}`,
        () => dev.received.filter((m) => m.type === "stream.open")[n - 1],
        5000,
        20,
      )) as { id: number };
      dev.send({ type: "stream.ready", id: open.id, window: 65536 });
      data(open.id, 1, `line of ${open.id}\n`);
      return { id: open.id, res: await res };
    };
    const first = await stream(1);
    const second = await stream(2);
    expect(first.res.status).toBe(200);
    data(first.id, 9, "on a channel logs do not have");
    await eventually(
      "the hub to close the bad stream",
      () => dev.received.find((m) => m.type === "stream.close" && m.id === first.id),
      5000,
      20,
    );
    await expect(first.res.text()).rejects.toThrow();
    expect(dev.closed).toBeUndefined();
    const reader = second.res.body?.getReader();
    expect(Buffer.from((await reader?.read())?.value ?? []).toString()).toBe(
      `line of ${second.id}\n`,
    );
    await stream(3);
    await stream(4);
    await stream(5);
    const over = await logsOf("fake-a");
    expect(over.status).toBe(429);
    expect(((await over.json()) as { message: string }).message).toBe(
      'node "fake-a" runs 4 streams already (the limit is 4)',
    );
    await hub.api("/api/v1/nodes/fake-a/revoke", { method: "POST" });
    await expect(reader?.read()).rejects.toThrow();
    expect((await dev.waitClosed()).code).toBe(4403);
  }, 30_000);

  test("logs of a pod on a device that is offline give a clear error", async () => {
    const dev = await fakeDevice("fake-b");
    dev.close();
    await dev.waitClosed();
    const res = await logsOf("fake-b");
    expect(res.status).toBe(503);
    expect(((await res.json()) as { message: string }).message).toBe(
      'node "fake-b" is offline: its agent is not connected to the hub',
    );
  });
});
