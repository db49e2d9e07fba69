// kubectl 1.32 from the machine against the compiled hub (HTTPS with its own CA) and a real agent:
// reads checked against the hub's own API, a watch, logs, exec under a pseudo-terminal, a
// missing container, port-forward, apply and label. Where kubectl is not installed the tests are
// skipped with the reason, and hub-streams.test.ts covers the same paths with fleetlet --hub.
// Needs root and the test bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Node } from "../../src/api/node.ts";
import type { Event, Pod } from "../../src/api/types.ts";
import { Background, run, underPty } from "../lib/processes.ts";
import { StreamsFixture } from "../lib/streams-fixture.ts";

const kubectl = Bun.which("kubectl");
const f = new StreamsFixture();
const { hub, agent } = f;
const pod = () => f.pod;
const hubJson = <T>(path: string) => f.hubJson<T>(path);
beforeAll(() => f.setup(), 90_000);
afterAll(() => f.cleanup(), 60_000);
const env = () => f.env;
const kc = (...args: string[]) => run([kubectl ?? "kubectl", ...args], { env: env() });

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
      const watch = new Background([kubectl as string, "get", "pods", "-w"], env());
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
      await f.followSeesNewLines(kubectl as string);
      const prev = await kc("logs", pod(), "-c", "crash", "--previous");
      expect(prev.code).toBe(0);
      expect(prev.stdout).toMatch(/^run \d+\.\d+/);
      const cur = await kc("logs", pod(), "-c", "crash");
      expect(cur.stdout).not.toBe(prev.stdout);
      const asked = Date.now();
      const recent = await kc("logs", pod(), "-c", "main", "--since", "2s", "--timestamps");
      const lines = recent.stdout.trim().split("\n");
      expect(lines.length).toBeGreaterThan(0);
      for (const line of lines) {
        expect(line).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z tick \d+$/);
        expect(Date.parse(line.split(" ")[0] ?? "")).toBeGreaterThanOrEqual(asked - 2000);
      }
    }, 30_000);

    test("exec -it runs a shell under a terminal, sees stdin and its size, and returns the exit code", async () => {
      const r = await underPty(
        `kubectl exec -it ${pod()} -c main -- sh`,
        [
          { after: /\/ # /, type: "stty size; read x; echo got:$x\r" },
          { after: /read x/, type: "hello\r" },
          { after: /got:hello/, type: "exit 7\r" },
        ],
        { env: env(), cols: 120, rows: 40 },
      );
      expect(r.out).toContain("40 120");
      expect(r.out).toContain("got:hello");
      expect(r.out).toContain("command terminated with exit code 7");
      expect(r.code).toBe(7);
      const piped = await run(
        [kubectl as string, "exec", "-i", pod(), "-c", "main", "--", "sh", "-c", "cat; exit 3"],
        { env: env(), stdin: "line 1\nline 2\n" },
      );
      expect(piped.stdout).toBe("line 1\nline 2\n");
      expect(piped.code).toBe(3);
    }, 30_000);

    test("logs of a pod on a device that is offline give a clear error", async () => {
      const dev = await f.fakeDevice("fake-k");
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
      const pf = new Background(
        [kubectl as string, "port-forward", `pod/${pod()}`, ":8080"],
        env(),
      );
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

    test("get pods shows each pod's AGE; describe node shows the device's lease", async () => {
      const pods = await kc("get", "pods");
      expect(pods.stdout).toMatch(
        new RegExp(`^${pod()}\\s+\\d/3\\s+\\S+\\s+\\d+\\s+(\\(.*\\)\\s+)?\\d+[smh]`, "m"),
      );
      expect(pods.stdout).not.toContain("<unknown>");
      const described = await kc("describe", "node", agent.nodeName);
      expect(described.stdout).toMatch(
        new RegExp(
          `\\nLease:\\n\\s+HolderIdentity:\\s+${agent.nodeName}\\n\\s+AcquireTime:\\s+<unset>\\n\\s+RenewTime:\\s+\\w{3}, `,
        ),
      );
      expect(described.stdout + described.stderr).not.toContain("Failed to get lease");
      const leases = await kc("get", "leases", "-n", "kube-node-lease");
      expect(leases.stdout).toMatch(
        new RegExp(`^NAME\\s+HOLDER\\s+AGE\\n${agent.nodeName}\\s+${agent.nodeName}\\s+\\d+[smh]`),
      );
    });

    test("a DaemonSet applied without updateStrategy is stored defaulted, and rollout status ends: rolled out, then after the hub rolled a crashing revision back", async () => {
      const file = join(hub.dataDir, "beat.yaml");
      const beat = (command: string) =>
        `apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: beat}\nspec:\n  minReadySeconds: 2\n  selector: {matchLabels: {app: beat}}\n  template:\n    metadata: {labels: {app: beat}}\n    spec:\n      terminationGracePeriodSeconds: 1\n      containers: [{name: main, image: ${agent.tb.busybox}, command: ["sh", "-c", "${command}"]}]\n`;
      writeFileSync(file, beat("sleep 3600"));
      expect((await kc("apply", "-f", file)).stdout).toBe("daemonset.apps/beat created\n");
      const yaml = (await kc("get", "ds", "beat", "-o", "yaml")).stdout;
      expect(yaml).toContain(
        "  updateStrategy:\n    rollingUpdate:\n      maxSurge: 0\n      maxUnavailable: 1\n    type: RollingUpdate\n",
      );
      expect(yaml).toContain("  revisionHistoryLimit: 10\n");
      expect(yaml).toContain("      dnsPolicy: ClusterFirst\n      restartPolicy: Always\n");
      expect(yaml).toContain("        imagePullPolicy: IfNotPresent\n");
      expect(yaml).toMatch(/\n {2}generation: 1\n/);
      const done = await kc("rollout", "status", "ds/beat", "--timeout", "60s");
      expect(done).toMatchObject({ code: 0 });
      expect(done.stdout).toEndWith('daemon set "beat" successfully rolled out\n');
      const again = await kc("apply", "-f", file);
      expect(again.stdout).toBe("daemonset.apps/beat unchanged\n");

      writeFileSync(file, beat("exit 1"));
      expect((await kc("apply", "-f", file)).stdout).toBe("daemonset.apps/beat configured\n");
      const back = await kc("rollout", "status", "ds/beat", "--timeout", "120s");
      expect(back.code).toBe(0);
      expect(back.stdout).toContain(
        'Waiting for daemon set "beat" rollout to finish: 0 out of 1 new pods have been updated...',
      );
      expect(back.stdout).toEndWith('daemon set "beat" successfully rolled out\n');
      const progressing = await kc(
        "get",
        "ds",
        "beat",
        "-o",
        'jsonpath={.metadata.generation} {.status.observedGeneration} {.status.conditions[?(@.type=="Progressing")].reason}',
      );
      expect(progressing.stdout).toBe("2 2 RolloutFailed");
      const p = await hubJson<Pod>(`/api/v1/namespaces/default/pods/beat-${agent.nodeName}`);
      expect(p?.spec.containers[0]?.command).toEqual(["sh", "-c", "sleep 3600"]);
      expect((await kc("delete", "-f", file)).code).toBe(0);
    }, 180_000);

    test("apply (client-side and server-side), create, replace, delete, label node, and a 404", async () => {
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
      expect((await kc("create", "-f", file)).stdout).toBe("configmap/settings created\n");
      expect((await kc("create", "-f", file)).stderr).toContain(
        'Error from server (AlreadyExists): error when creating "',
      );
      expect((await kc("replace", "-f", file)).stdout).toBe("configmap/settings replaced\n");
      expect((await kc("delete", "configmap", "settings")).stdout).toBe(
        'configmap "settings" deleted\n',
      );
      expect((await kc("get", "configmap", "settings")).stderr.trim()).toBe(
        'Error from server (NotFound): configmaps "settings" not found',
      );
    });
  },
);
