// Deploying from the hub (docs/deploy.md) with the compiled hub and three compiled agents with
// their own node names and labels on the test bed: node selection and relabelling, a name
// clash with a file pod, apply-time validation, device policy, rollouts with canary, failure
// gate, rollback and undo, and a device rebooted while the hub is down. Needs root and the test
// bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { DaemonSet } from "../../src/api/daemonset.ts";
import type { Pod } from "../../src/api/types.ts";
import { TestAgent } from "../lib/agent.ts";
import { daemonSetYaml, hubCli, hubCliAsync, rolloutView, tempManifest } from "../lib/deploy.ts";
import { TestHub } from "../lib/hub.ts";
import { eventually } from "../lib/testbed.ts";

const hub = new TestHub(["--heartbeat-interval", "1s", "--rollout-interval", "200ms"]);
/** Each agent's flags; the hub's address and a join token are added once the hub runs. */
const argLists: string[][] = [[], [], []];
const agents = argLists.map((args) => new TestAgent({ args })) as [TestAgent, TestAgent, TestAgent];
const [a, b, c] = agents;
const img = a.tb.busybox;
const img2 = a.tb.busyboxV2;
const dataPrefix = "/var/lib/fleetlet-e2e-data";

function agentArgs(agent: TestAgent, joinToken: string): string[] {
  const config = join(agent.dir, "config.yaml");
  writeFileSync(config, `hubPodPolicy:\n  allowedHostPathPrefixes: ["${dataPrefix}"]\n`);
  return [
    "--config",
    config,
    "--hub",
    hub.url,
    "--join-token",
    joinToken,
    "--hub-reconnect-back-off-base",
    "200ms",
    "--hub-reconnect-back-off-max",
    "1s",
    "--node-status-update-frequency",
    "1s",
    "--node-labels",
    "tier=edge",
  ];
}

const running = (p: Pod) => p.status?.phase === "Running";
const containerId = (p: Pod | undefined) => p?.status?.containerStatuses?.[0]?.containerID;
const imageOf = (p: Pod | undefined) => p?.spec.containers[0]?.image;

async function gone(agent: TestAgent, name: string): Promise<void> {
  await eventually(
    `pod ${name} gone from ${agent.nodeName}`,
    async () => (await agent.pod(name)) === undefined,
    30_000,
    200,
  );
}

function apply(yaml: string, file = "ds.yaml") {
  return hubCli(hub, ["apply", "-f", tempManifest(file, yaml)]);
}

beforeAll(async () => {
  await hub.start();
  const sites = ["a", "a", "b"];
  for (const [i, agent] of agents.entries()) {
    const token = await hub.joinToken("1h", { site: sites[i] ?? "a" });
    argLists[i]?.push(...agentArgs(agent, token));
  }
  await Promise.all(agents.map((x) => x.start()));
}, 60_000);
afterAll(async () => {
  await Promise.all(agents.map((x) => x.cleanup()));
  await hub.cleanup();
}, 60_000);

describe("fleetlet hub deploying DaemonSets to fleetlet agents (needs root and the test bed)", () => {
  test("a DaemonSet runs on exactly the matching devices; relabel → pods follow; a file pod keeps its name; delete → gone", async () => {
    const web = daemonSetYaml({
      name: "web",
      image: img,
      nodeSelector: { site: "a", tier: "edge" },
    });
    expect(apply(web)).toMatchObject({ code: 0, stdout: "daemonset.apps/web created\n" });
    await a.waitPod("web", "Running", running);
    await b.waitPod("web", "Running", running);
    const table = await eventually(
      "the DaemonSet ready on 2 devices",
      async () => {
        const out = hubCli(hub, ["get", "daemonsets"]).stdout;
        return /web\s+2\s+2\s+2\s+2\s+2\s+site=a,tier=edge\s/.test(out) ? out : undefined;
      },
      15_000,
      200,
    );
    expect(table).toStartWith(
      "NAME   DESIRED   CURRENT   READY   UP-TO-DATE   AVAILABLE   NODE SELECTOR",
    );
    expect(await c.pod("web")).toBeUndefined();
    const pods = hubCli(hub, ["get", "pods", "-l", "app=web"]).stdout.trim().split("\n");
    expect(pods).toHaveLength(3);
    const yaml = hubCli(hub, ["get", "daemonset", "web", "-o", "json"]);
    const ds = JSON.parse(yaml.stdout) as DaemonSet;
    expect(ds.status).toMatchObject({
      desiredNumberScheduled: 2,
      numberReady: 2,
      numberAvailable: 2,
    });
    expect(ds.status?.conditions?.[0]?.reason).toBe("RolloutComplete");
    const onA = await a.pod("web");
    expect(onA?.metadata.ownerReferences?.[0]).toMatchObject({ kind: "DaemonSet", name: "web" });
    expect(onA?.metadata.annotations?.["kubernetes.io/config.source"]).toBe("api");

    const refused = hubCli(hub, ["label", "node", c.nodeName, "site=a"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("'site' already has a value (b), and --overwrite is false");
    expect(hubCli(hub, ["label", "node", c.nodeName, "site=a", "--overwrite"]).stdout).toBe(
      `node/${c.nodeName} labeled\n`,
    );
    expect(hubCli(hub, ["label", "node", b.nodeName, "site=b", "--overwrite"]).code).toBe(0);
    await c.waitPod("web", "Running", running);
    await gone(b, "web");

    c.writeManifest(
      "web.yaml",
      `apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n    - name: file\n      image: ${img}\n      command: ["sleep", "3600"]\n`,
    );
    const filePod = await c.waitPod(
      "web",
      "from the file",
      (p) => p.metadata.annotations?.["kubernetes.io/config.source"] === "file" && running(p),
    );
    expect(filePod.spec.containers[0]?.name).toBe("file");
    const clash = await eventually(
      "the name conflict in the hub",
      async () =>
        (await rolloutView(hub, "web")).devices.find(
          (d) => d.name === c.nodeName && d.state === "NameConflict",
        ),
      15_000,
      200,
    );
    expect(clash.message).toContain('source "file" already has a pod of that name');
    c.removeManifest("web.yaml");
    await c.waitPod(
      "web",
      "from the hub again",
      (p) => p.metadata.annotations?.["kubernetes.io/config.source"] === "api" && running(p),
    );

    expect(hubCli(hub, ["delete", "daemonset", "web"]).stdout).toBe(
      'daemonset.apps "web" deleted\n',
    );
    await gone(a, "web");
    await gone(c, "web");
  }, 120_000);

  test("invalid objects are refused at apply with field errors, and nothing of the apply is stored", async () => {
    const good = daemonSetYaml({ name: "ok", image: img, nodeSelector: { site: "nowhere" } });
    const bad = daemonSetYaml({ name: "bad", image: img }).replace(`          image: ${img}\n`, "");
    const r = apply(`${good}---\n${bad}`, "both.yaml");
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("nothing was applied");
    expect(r.stderr).toContain(
      'The DaemonSet "bad" is invalid: spec.template.spec.containers[0].image: Required value',
    );
    expect(hubCli(hub, ["get", "daemonsets"]).stderr).toBe(
      "No resources found in default namespace.\n",
    );
    const res = await hub.api("/apis/apps/v1/namespaces/default/daemonsets/bad", {
      method: "PUT",
      body: JSON.stringify({
        apiVersion: "apps/v1",
        kind: "DaemonSet",
        metadata: { name: "bad" },
        spec: { selector: {}, template: { spec: { containers: [] } } },
      }),
    });
    expect(res.status).toBe(422);
    const body = (await res.json()) as { reason: string; message: string };
    expect(body.reason).toBe("Invalid");
    expect(body.message).toContain(
      "spec.selector: Invalid value: object: empty selector is invalid for daemonset",
    );
    expect(body.message).toContain("spec.template.spec.containers: Required value");
  }, 30_000);

  test("policy: a privileged pod adding SYS_ADMIN with a hostPath outside the allowed prefixes is refused on the device, with the reason in the hub", async () => {
    const risky = daemonSetYaml({
      name: "risky",
      image: img,
      nodeSelector: { site: "a" },
      container:
        "          securityContext:\n            privileged: true\n            capabilities: {add: [NET_BIND_SERVICE, SYS_ADMIN]}\n",
      podSpec: "      volumes:\n        - name: etc\n          hostPath:\n            path: /etc\n",
    });
    expect(apply(risky).code).toBe(0);
    const pod = await a.waitPod("risky", "Failed", (p) => p.status?.phase === "Failed");
    expect(pod.status?.reason).toBe("DevicePolicy");
    expect(pod.status?.message).toContain(
      "privileged containers are not allowed (hubPodPolicy.allowPrivileged is false)",
    );
    // NET_BIND_SERVICE is in every container's default set; SYS_ADMIN is not.
    expect(pod.status?.message).toContain(
      "spec.containers[0].securityContext.capabilities.add: SYS_ADMIN not allowed (hubPodPolicy.allowedCapabilities: [])",
    );
    expect(pod.status?.message).toContain(
      `"/etc" is not under an allowed prefix (hubPodPolicy.allowedHostPathPrefixes: ["${dataPrefix}"])`,
    );
    const status = await eventually(
      "the refusal in rollout status",
      async () => {
        const r = hubCli(hub, ["rollout", "status", "daemonset/risky", "--watch=false"]);
        return r.stdout.includes("DevicePolicy") ? r.stdout : undefined;
      },
      15_000,
      300,
    );
    expect(status).toContain("privileged containers are not allowed");
    expect(hubCli(hub, ["delete", "-f", tempManifest("risky.yaml", risky)]).code).toBe(0);
    await gone(a, "risky");
  }, 60_000);

  test("rollout: v1 → v2 goes device by device after a canary; v3 crashing stops at the canary and is rolled back; undo", async () => {
    expect(hubCli(hub, ["label", "node", b.nodeName, "site=a", "--overwrite"]).code).toBe(0);
    const v = (image: string, command = "sleep 3600") =>
      daemonSetYaml({
        name: "app",
        image,
        command,
        nodeSelector: { site: "a" },
        minReadySeconds: 1,
        annotations: { "rollout.fleetlet.io/progress-deadline": "60s" },
      });
    expect(apply(v(img)).code).toBe(0);
    const first = await hubCliAsync(hub, [
      "rollout",
      "status",
      "daemonset/app",
      "--timeout",
      "60s",
    ]);
    expect(first.stdout).toEndWith('daemon set "app" successfully rolled out\n');

    expect(apply(v(img2)).stdout).toBe("daemonset.apps/app configured\n");
    let mostUpdating = 0;
    const updatedCounts: number[] = [];
    await eventually(
      "v2 rolled out",
      async () => {
        const view = await rolloutView(hub, "app");
        mostUpdating = Math.max(
          mostUpdating,
          view.devices.filter((d) => d.state === "Updating").length,
        );
        const n = view.devices.filter((d) => d.state === "Updated").length;
        if (updatedCounts.at(-1) !== n) updatedCounts.push(n);
        return view.phase === "Complete" && view.updateRevision === 2;
      },
      60_000,
      50,
    );
    // Never more than one device updating at once, and the updated count only grows.
    expect(mostUpdating).toBe(1);
    for (const [i, n] of updatedCounts.entries())
      expect(n).toBeGreaterThanOrEqual(updatedCounts[i - 1] ?? 0);
    expect(updatedCounts.at(-1)).toBe(3);
    for (const agent of agents) expect(imageOf(await agent.pod("app"))).toBe(img2);
    const before = await Promise.all(agents.map(async (x) => containerId(await x.pod("app"))));

    expect(apply(v(img2, "exit 1")).code).toBe(0);
    const stopped = await hubCliAsync(hub, [
      "rollout",
      "status",
      "daemonset/app",
      "--timeout",
      "60s",
    ]);
    expect(stopped.code).toBe(1);
    expect(stopped.stderr).toContain('daemon set "app" rollout of revision 3 stopped on device');
    expect(stopped.stderr).toContain('container "main" is crash-looping (CrashLoopBackOff');
    expect(stopped.stderr).toContain("rolled back to revision 2");
    const view = await rolloutView(hub, "app");
    const canary = agents.find((x) => x.nodeName === view.failed?.device);
    if (canary === undefined) throw new Error(`no failed device in ${JSON.stringify(view)}`);
    await canary.waitPod(
      "app",
      "back on v2",
      (p) => running(p) && p.spec.containers[0]?.command?.[2] === "sleep 3600",
      30_000,
    );
    for (const [i, agent] of agents.entries())
      if (agent !== canary) expect(containerId(await agent.pod("app"))).toBe(before[i]);

    const history = hubCli(hub, ["rollout", "history", "daemonset/app"]).stdout;
    expect(history).toContain(
      "REVISION  CHANGE-CAUSE\n1         <none>\n2         <none>\n3         <none>\n",
    );
    expect(hubCli(hub, ["rollout", "undo", "daemonset/app"]).stdout).toBe(
      "daemonset.apps/app rolled back\n",
    );
    const after = await hubCliAsync(hub, [
      "rollout",
      "status",
      "daemonset/app",
      "--timeout",
      "30s",
    ]);
    expect(after.code).toBe(0);
    for (const [i, agent] of agents.entries())
      if (agent !== canary) expect(containerId(await agent.pod("app"))).toBe(before[i]);
    expect(hubCli(hub, ["delete", "daemonset", "app"]).code).toBe(0);
    for (const agent of agents) await gone(agent, "app");
  }, 180_000);

  test("a DaemonSet reads a ConfigMap and a Secret from the hub; the Secret never reaches a device without such a pod", async () => {
    expect(hubCli(hub, ["label", "node", a.nodeName, "role=reader"]).code).toBe(0);
    const objects = `apiVersion: v1
kind: ConfigMap
metadata:
  name: cfg
data:
  greeting: hello from the hub
---
apiVersion: v1
kind: Secret
metadata:
  name: creds
stringData:
  password: s3cret-value
---
${daemonSetYaml({
  name: "reader",
  image: img,
  command: 'cat /cfg/greeting; echo; echo "password=$PASSWORD"; sleep 3600',
  nodeSelector: { role: "reader" },
  container:
    "          env:\n            - name: PASSWORD\n              valueFrom:\n                secretKeyRef: {name: creds, key: password}\n          volumeMounts:\n            - {name: cfg, mountPath: /cfg}\n",
  podSpec: "      volumes:\n        - name: cfg\n          configMap: {name: cfg}\n",
})}`;
    const applied = apply(objects, "reader.yaml");
    expect(applied.stdout).toBe(
      "configmap/cfg created\nsecret/creds created\ndaemonset.apps/reader created\n",
    );
    await a.waitPod("reader", "Running", running);
    const logs = await eventually(
      "the pod's output",
      async () => {
        const out = a.cli(["logs", `reader-${a.nodeName}`]).stdout;
        return out.includes("password=") ? out : undefined;
      },
      15_000,
      200,
    );
    expect(logs).toBe("hello from the hub\npassword=s3cret-value\n");
    const saved = join(a.rootDir, "hub", "desired.json");
    expect(await Bun.file(saved).text()).toContain('"creds"');
    expect(statSync(saved).mode & 0o777).toBe(0o600);
    const encoded = Buffer.from("s3cret-value").toString("base64");
    for (const other of [b, c]) {
      const text = await Bun.file(join(other.rootDir, "hub", "desired.json")).text();
      expect(text).not.toContain("creds");
      expect(text).not.toContain(encoded);
      expect(await other.pod("reader")).toBeUndefined();
    }
    expect(hubCli(hub, ["delete", "-f", tempManifest("reader.yaml", objects)]).stdout).toBe(
      'daemonset.apps "reader" deleted\nsecret "creds" deleted\nconfigmap "cfg" deleted\n',
    );
    await gone(a, "reader");
    expect(await Bun.file(saved).text()).not.toContain("creds");
    // Deleted by kind and name, as an operator types it; a second time there is nothing to delete.
    const spare = `apiVersion: v1
kind: ConfigMap
metadata:
  name: spare
data: {a: b}
---
apiVersion: v1
kind: Secret
metadata:
  name: spare-creds
stringData: {k: v}
`;
    expect(apply(spare, "spare.yaml").code).toBe(0);
    expect(hubCli(hub, ["delete", "configmap", "spare"]).stdout).toBe(
      'configmap "spare" deleted\n',
    );
    expect(hubCli(hub, ["delete", "secret", "spare-creds"]).stdout).toBe(
      'secret "spare-creds" deleted\n',
    );
    const again = hubCli(hub, ["delete", "configmap", "spare"]);
    expect(again.code).not.toBe(0);
    expect(again.stderr).toContain('"spare" not found');
  }, 60_000);

  test("offline: hub stopped, agent killed and its containers gone → hub pods back from disk; hub started → nothing restarts", async () => {
    expect(
      apply(daemonSetYaml({ name: "keep", image: img, nodeSelector: { site: "a" } })).code,
    ).toBe(0);
    await a.waitPod("keep", "Running", running);
    await hub.stop();
    await a.stop("SIGKILL");
    await a.removeSandboxes();
    await a.start();
    const back = await a.waitPod("keep", "Running again from disk", running, 30_000);
    expect(back.metadata.annotations?.["kubernetes.io/config.source"]).toBe("api");
    await hub.start();
    await eventually(
      "the device online again",
      async () => {
        const res = await hub.api(`/api/v1/nodes/${a.nodeName}`);
        return (
          ((await res.json()) as { metadata: { annotations: Record<string, string> } }).metadata
            .annotations["hub.fleetlet.io/online"] === "true"
        );
      },
      15_000,
      200,
    );
    await Bun.sleep(3000);
    const now = await a.pod("keep");
    expect(containerId(now)).toBe(containerId(back));
    expect(now?.status?.containerStatuses?.[0]?.restartCount).toBe(
      back.status?.containerStatuses?.[0]?.restartCount ?? -1,
    );
    expect(hubCli(hub, ["delete", "daemonset", "keep"]).code).toBe(0);
    await gone(a, "keep");
  }, 90_000);
});
