import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { DaemonSet } from "../../../src/api/daemonset.ts";
import type { Pod } from "../../../src/api/types.ts";
import { createLocalBus } from "../../../src/hub/bus.ts";
import { Deployer } from "../../../src/hub/deploy/deployer.ts";
import { SqliteDeployStore } from "../../../src/hub/deploy/store-sqlite.ts";
import { Identity } from "../../../src/hub/identity.ts";
import { openHubDatabase, SqliteHubStore } from "../../../src/hub/store-sqlite.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { reportedStatus } from "../../lib/deploy.ts";
import { testFleet } from "../../lib/hub-fleet.ts";

let dirs: string[] = [];
afterEach(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  dirs = [];
});

/** A hub's deploy side on a store file, with devices that join and connect. */
async function hub(file: string, clock: FakeClock) {
  const db = openHubDatabase(file);
  const store = new SqliteHubStore(db);
  const loaded = await store.load();
  const fleet = testFleet(store, loaded, clock);
  const identity = new Identity({ store, nodes: fleet.nodes }, loaded);
  const bus = createLocalBus();
  const sent: string[] = [];
  bus.subscribe("desired", (m) => sent.push(m.node));
  const deployStore = new SqliteDeployStore(db);
  const deployer = new Deployer({
    store: deployStore,
    loaded: await deployStore.load(),
    fleet,
    bus,
    clock,
    log: nullLogger,
    flushStore: () => store.flush(),
    intervalMs: 1000,
  });
  await deployer.reconcile();
  const seqs = new Map<string, number>();
  return {
    db,
    store,
    fleet,
    deployer,
    sent,
    async join(name: string, labels: Record<string, string>) {
      const tok = await identity.createJoinToken(60_000, labels, clock.now());
      await identity.join({ joinToken: tok.token, nodeName: name }, clock.now());
      this.connect(name);
    },
    connect(name: string) {
      fleet.connect(
        name,
        {
          type: "hello",
          protocolVersion: 1,
          nodeName: name,
          agentVersion: "t",
          streamId: `s-${name}`,
          features: ["desired-pods", "desired-config"],
        },
        clock.now(),
      );
    },
    /** The pods of the device's current desired message. */
    desired(name: string): Pod[] {
      const text = deployer.desiredFor(name, undefined, true);
      return text === undefined ? [] : (JSON.parse(text) as { pods: Pod[] }).pods;
    },
    /** The device stores its desired state and reports its pods Ready (or crash-looping). */
    run(name: string, crash = false) {
      const rec = fleet.nodes.get(name);
      fleet.setDesiredAck(name, { generation: rec?.desiredGeneration ?? 0 });
      for (const pod of this.desired(name)) {
        const seq = (seqs.get(name) ?? 0) + 1;
        seqs.set(name, seq);
        const status = reportedStatus(crash ?? false);
        fleet.ingest(name, {
          type: "pod.upsert",
          seq,
          uid: pod.metadata.uid ?? "",
          pod: { ...pod, status },
        });
      }
    },
  };
}

function daemonSet(
  image: string,
  extra: Partial<DaemonSet["spec"]> = {},
  annotations = {},
): DaemonSet {
  return {
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata: { name: "web", namespace: "default", annotations },
    spec: {
      selector: { matchLabels: { app: "web" } },
      template: {
        metadata: { labels: { app: "web" } },
        spec: { nodeSelector: { site: "a" }, containers: [{ name: "main", image }] },
      },
      ...extra,
    },
  };
}

async function setup() {
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-deployer-"));
  dirs.push(dir);
  const clock = new FakeClock(Date.UTC(2026, 0, 1));
  const file = join(dir, "hub.db");
  return { clock, file, h: await hub(file, clock) };
}

const names = (pods: Pod[]) => pods.map((p) => p.metadata.name);
const imageOf = (pods: Pod[]) => pods[0]?.spec.containers[0]?.image;

describe("Deployer", () => {
  test("a DaemonSet goes to exactly the devices its nodeSelector matches, as <ds>-<node>", async () => {
    const { h } = await setup();
    await h.join("cam-1", { site: "a" });
    await h.join("cam-2", { site: "a" });
    await h.join("cam-3", { site: "b" });
    const r = await h.deployer.apply(daemonSet("busybox:1"));
    expect(r.result).toBe("created");
    expect(h.sent.sort()).toEqual(["cam-1", "cam-2"]);
    const pods = h.desired("cam-1");
    expect(names(pods)).toEqual(["web-cam-1"]);
    expect(pods[0]?.spec.nodeName).toBe("cam-1");
    expect(pods[0]?.metadata.labels?.app).toBe("web");
    expect(pods[0]?.metadata.ownerReferences?.[0]).toMatchObject({
      kind: "DaemonSet",
      name: "web",
    });
    expect(h.desired("cam-3")).toEqual([]);
    expect((await h.deployer.apply(daemonSet("busybox:1"))).result).toBe("unchanged");
  });

  test("relabelling moves the pod; deleting the DaemonSet empties every device's state", async () => {
    const { h } = await setup();
    await h.join("cam-1", { site: "a" });
    await h.join("cam-3", { site: "b" });
    await h.deployer.apply(daemonSet("busybox:1"));
    await h.fleet.setHubLabels("cam-1", { site: "b" });
    await h.fleet.setHubLabels("cam-3", { site: "a" });
    await h.deployer.reconcile();
    expect(h.desired("cam-1")).toEqual([]);
    expect(names(h.desired("cam-3"))).toEqual(["web-cam-3"]);
    await h.deployer.delete("default", "web");
    expect(h.desired("cam-3")).toEqual([]);
    expect(h.fleet.nodes.get("cam-3")?.desiredGeneration).toBe(2);
  });

  test("a hub restart keeps objects, revisions and generations: nothing is resent", async () => {
    const { h, file, clock } = await setup();
    await h.join("cam-1", { site: "a" });
    await h.deployer.apply(daemonSet("busybox:1"));
    const generation = h.fleet.nodes.get("cam-1")?.desiredGeneration;
    h.store.close();
    const again = await hub(file, clock);
    expect(again.fleet.nodes.get("cam-1")?.desiredGeneration).toBe(generation);
    expect(again.sent).toEqual([]);
    expect(again.deployer.desiredFor("cam-1", generation, true)).toBeUndefined();
    expect(names(again.desired("cam-1"))).toEqual(["web-cam-1"]);
    expect(
      again.deployer.catalog.controllerRevisions(again.deployer.catalog.list()[0] as DaemonSet),
    ).toHaveLength(1);
  });

  test("a DaemonSet stored before the hub defaulted it keeps its revision: applied again, nothing changes", async () => {
    const { h, file, clock } = await setup();
    await h.join("cam-1", { site: "a" });
    const first = (await h.deployer.apply(daemonSet("busybox:1"))).daemonSet;
    expect(first.spec.updateStrategy).toEqual({
      type: "RollingUpdate",
      rollingUpdate: { maxUnavailable: 1, maxSurge: 0 },
    });
    expect(first.spec.template.spec.restartPolicy).toBe("Always");
    const uid = h.desired("cam-1")[0]?.metadata.uid;
    // The stored object and revision as an older hub wrote them: not defaulted.
    const raw = daemonSet("busybox:1");
    const old = { ...raw, metadata: { ...first.metadata }, spec: raw.spec };
    h.db.query("UPDATE objects SET body = ? WHERE kind = 'DaemonSet'").run(JSON.stringify(old));
    h.db.query("UPDATE revisions SET template = ?").run(JSON.stringify(raw.spec.template));
    h.store.close();
    const again = await hub(file, clock);
    expect(again.deployer.get("default", "web")?.spec.revisionHistoryLimit).toBe(10);
    expect((await again.deployer.apply(daemonSet("busybox:1"))).result).toBe("unchanged");
    expect(again.desired("cam-1")[0]?.metadata.uid).toBe(uid);
    expect(again.sent).toEqual([]);
  });

  test("an agent ahead of the hub (restored store) makes the hub raise its generation", async () => {
    const { h } = await setup();
    await h.join("cam-1", { site: "a" });
    await h.deployer.apply(daemonSet("busybox:1"));
    const text = h.deployer.desiredFor("cam-1", 9, true);
    expect(JSON.parse(text ?? "{}").generation).toBe(10);
  });

  test("v1 → v2 goes one device at a time after the canary; v3 crashing is rolled back", async () => {
    const { h, clock } = await setup();
    for (const n of ["cam-1", "cam-2", "cam-3"]) await h.join(n, { site: "a" });
    await h.deployer.apply(daemonSet("busybox:1"));
    for (const n of ["cam-1", "cam-2", "cam-3"]) h.run(n);
    clock.step(1000);
    await h.deployer.reconcile();
    expect((await h.deployer.rollout("default", "web")).phase).toBe("Complete");

    await h.deployer.apply(daemonSet("busybox:2"));
    const images = () => ["cam-1", "cam-2", "cam-3"].map((n) => imageOf(h.desired(n)));
    expect(images()).toEqual(["busybox:2", "busybox:1", "busybox:1"]);
    expect((await h.deployer.rollout("default", "web")).phase).toBe("Canary");
    for (const step of [
      ["busybox:2", "busybox:2", "busybox:1"],
      ["busybox:2", "busybox:2", "busybox:2"],
    ]) {
      for (const n of ["cam-1", "cam-2", "cam-3"]) h.run(n);
      clock.step(1000);
      await h.deployer.reconcile();
      expect(images()).toEqual(step);
    }
    for (const n of ["cam-1", "cam-2", "cam-3"]) h.run(n);
    await h.deployer.reconcile();
    expect((await h.deployer.rollout("default", "web")).phase).toBe("Complete");

    await h.deployer.apply(daemonSet("busybox:3"));
    expect(images()).toEqual(["busybox:3", "busybox:2", "busybox:2"]);
    h.run("cam-1", true);
    await h.deployer.reconcile();
    const view = await h.deployer.rollout("default", "web");
    expect(view.phase).toBe("Failed");
    expect(view.message).toContain("rollout of revision 3 stopped on device cam-1");
    expect(view.message).toContain(
      'container "main" is crash-looping (CrashLoopBackOff; last exit code 1, Error)',
    );
    expect(view.message).toContain("rolled back to revision 2");
    expect(images()).toEqual(["busybox:2", "busybox:2", "busybox:2"]);
    // kubectl's rollout status: generation observed; updated = devices on what they are sent.
    const counts = () => {
      const d = h.deployer.get("default", "web");
      const s = d?.status;
      return [d?.metadata.generation, s?.observedGeneration, s?.updatedNumberScheduled];
    };
    expect(counts()).toEqual([3, 3, 2]);
    h.run("cam-1");
    await h.deployer.reconcile();
    expect(counts()).toEqual([3, 3, 3]);
    const ds = h.deployer.get("default", "web");
    expect(ds?.status?.conditions?.[0]).toMatchObject({
      type: "Progressing",
      status: "False",
      reason: "RolloutFailed",
    });

    const undo = await h.deployer.undo("default", "web", undefined);
    expect(undo.changed).toBe(true);
    expect(undo.target.revision).toBe(2);
    expect((await h.deployer.rollout("default", "web")).phase).toBe("Complete");
    expect(h.deployer.catalog.controllerRevisions(undo.daemonSet).map((r) => r.revision)).toEqual([
      1, 3, 4,
    ]);
  });

  test("a device that refused its desired state is shown with the device's reason", async () => {
    const { h } = await setup();
    await h.join("cam-1", { site: "a" });
    await h.deployer.apply(daemonSet("busybox:1"));
    h.fleet.setDesiredAck("cam-1", {
      generation: 0,
      refused: { generation: 1, reason: "pods[0]: spec.containers: Required value" },
    });
    await h.deployer.reconcile();
    const view = await h.deployer.rollout("default", "web");
    expect(view.devices[0]?.message).toBe(
      "the device refused its desired state: pods[0]: spec.containers: Required value",
    );
    expect(view.message).toContain("device cam-1: the device refused its desired state");
  });

  test("an agent that does not run hub pods is left out and said to be too old", async () => {
    const { h } = await setup();
    await h.join("cam-1", { site: "a" });
    h.fleet.connect(
      "cam-1",
      {
        type: "hello",
        protocolVersion: 1,
        nodeName: "cam-1",
        agentVersion: "old",
        streamId: "s-cam-1",
      },
      0,
    );
    await h.deployer.apply(daemonSet("busybox:1"));
    expect(h.desired("cam-1")).toEqual([]);
    const device = (await h.deployer.rollout("default", "web")).devices[0];
    expect(device).toMatchObject({ name: "cam-1", state: "AgentTooOld" });
  });
});

describe("Deployer with ConfigMaps and Secrets", () => {
  const cm = {
    apiVersion: "v1" as const,
    kind: "ConfigMap" as const,
    metadata: { name: "cfg", namespace: "default" },
    data: { greeting: "hello" },
  };
  const secret = {
    apiVersion: "v1" as const,
    kind: "Secret" as const,
    metadata: { name: "creds", namespace: "default" },
    data: { password: Buffer.from("s3cret").toString("base64") },
    type: "Opaque",
  };
  function reader(): DaemonSet {
    const ds = daemonSet("busybox:1");
    ds.spec.template.spec.volumes = [{ name: "cfg", configMap: { name: "cfg" } }];
    ds.spec.template.spec.containers = [
      {
        name: "main",
        image: "busybox:1",
        volumeMounts: [{ name: "cfg", mountPath: "/cfg" }],
        env: [
          { name: "PASSWORD", valueFrom: { secretKeyRef: { name: "creds", key: "password" } } },
        ],
      },
    ];
    return ds;
  }
  const message = (h: Awaited<ReturnType<typeof hub>>, node: string, secure = true) =>
    JSON.parse(h.deployer.desiredFor(node, undefined, secure) ?? "{}") as {
      generation?: number;
      configMaps?: { metadata: { name: string } }[];
      secrets?: { metadata: { name: string } }[];
    };

  test("each device gets only the objects its own pods use; Secrets only over a secure connection", async () => {
    const { h } = await setup();
    await h.join("cam-1", { site: "a" });
    await h.join("cam-3", { site: "b" });
    await h.deployer.applyObject(cm);
    await h.deployer.applyObject(secret);
    await h.deployer.applyObject({ ...cm, metadata: { name: "unused", namespace: "default" } });
    await h.deployer.apply(reader());
    const m = message(h, "cam-1");
    expect(m.configMaps?.map((o) => o.metadata.name)).toEqual(["cfg"]);
    expect(m.secrets?.map((o) => o.metadata.name)).toEqual(["creds"]);
    expect(h.deployer.desiredFor("cam-3", undefined, true)).toBeUndefined();
    const insecure = message(h, "cam-1", false);
    expect(insecure.secrets).toBeUndefined();
    expect(insecure.configMaps?.map((o) => o.metadata.name)).toEqual(["cfg"]);
    await h.deployer.reconcile();
    const device = (await h.deployer.rollout("default", "web")).devices[0];
    expect(device?.message).toContain("SecretsWithheld");
    // Kept with the node (so the leader sees it whichever replica holds the device); a secure
    // send clears it.
    expect(h.fleet.nodes.get("cam-1")?.secretsWithheld).toBe(true);
    expect(message(h, "cam-1").secrets?.map((o) => o.metadata.name)).toEqual(["creds"]);
    expect(h.fleet.nodes.get("cam-1")?.secretsWithheld).toBeUndefined();
    await h.deployer.reconcile();
    const after = (await h.deployer.rollout("default", "web")).devices[0];
    expect(after?.message ?? "").not.toContain("SecretsWithheld");
  });

  test("a changed ConfigMap raises the generation of the devices using it, and only theirs", async () => {
    const { h } = await setup();
    await h.join("cam-1", { site: "a" });
    await h.join("cam-3", { site: "b" });
    await h.deployer.applyObject(cm);
    await h.deployer.applyObject(secret);
    await h.deployer.apply(reader());
    const before = message(h, "cam-1").generation ?? 0;
    expect((await h.deployer.applyObject(cm)).result).toBe("unchanged");
    await h.deployer.applyObject({ ...cm, data: { greeting: "hi" } });
    expect(message(h, "cam-1").generation).toBe(before + 1);
    expect(h.fleet.nodes.get("cam-3")?.desiredGeneration).toBe(0);
  });

  test("an immutable object cannot change", async () => {
    const { h } = await setup();
    await h.deployer.applyObject({ ...cm, immutable: true });
    await expect(
      h.deployer.applyObject({ ...cm, immutable: true, data: { greeting: "x" } }),
    ).rejects.toThrow('The ConfigMap "cfg" is invalid');
  });
});
