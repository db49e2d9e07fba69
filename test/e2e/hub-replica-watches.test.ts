// Watches across hub replicas (docs/hub-replicas.md, step 3): two compiled replicas on one
// PostgreSQL database and one nats-server; a compiled agent with a static pod on replica A; the
// operator's watch stream and Kubernetes API watches at replica B see what A stored, numbered
// alike (a list at A, then a watch at B from its resourceVersion, misses nothing); ConfigMaps,
// Secrets and DaemonSets created at A are listed and watched at B; a watch from before the
// log's trim is answered 410 Gone; and with NATS restarted, B's watches keep receiving (its
// 2 s poll of the log) and serve what A serves after. Needs root, the test bed and scripts/build.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SQL } from "bun";
import { type NatsServer, startNatsServer } from "../../scripts/lib/nats.ts";
import { PostgresCluster } from "../../scripts/lib/postgres.ts";
import { TestAgent } from "../lib/agent.ts";
import { TestHub } from "../lib/hub.ts";
import { kubeList, kubeWatch, operatorWatch, type WatchEvent } from "../lib/hub-watches.ts";
import { sleeperManifest } from "../lib/manifests.ts";
import { startReplica } from "../lib/replicas.ts";
import { eventually } from "../lib/testbed.ts";

const RETENTION_S = 6;
let pg: PostgresCluster;
let nats: NatsServer;
let url = "";
const dir = mkdtempSync(join(tmpdir(), "fleetlet-replica-watches-e2e-"));
const keyFile = join(dir, "secrets.key");
let a: TestHub;
let b: TestHub;
const agentArgs = [
  ...["--hub-reconnect-back-off-base", "200ms", "--hub-reconnect-back-off-max", "1s"],
  ...["--node-status-update-frequency", "1s"],
];
const agent = new TestAgent({ args: agentArgs });

function replica(id: string): TestHub {
  return new TestHub(
    [
      ...["--store", url, "--bus", nats.url, "--secrets-key-file", keyFile],
      ...["--replica-id", id, "--heartbeat-interval", "1s"],
      ...["--change-log-retention", `${RETENTION_S}s`],
    ],
    "127.0.0.1",
    true,
  );
}

const named = (name: string) => (e: WatchEvent) => e.object.metadata.name === name;

beforeAll(async () => {
  pg = await PostgresCluster.start();
  nats = await startNatsServer();
  writeFileSync(keyFile, `${Buffer.alloc(32, 9).toString("base64")}\n`, { mode: 0o600 });
  url = await pg.createDatabase();
  a = replica("hub-a");
  await startReplica(a);
  b = replica("hub-b");
  await startReplica(b);
  agentArgs.push("--hub", a.url, "--join-token", await a.joinToken());
  await agent.start();
}, 120_000);
afterAll(async () => {
  await agent.cleanup();
  for (const h of [a, b]) await h?.cleanup();
  await nats?.stop();
  await pg?.remove();
  rmSync(dir, { recursive: true, force: true });
}, 60_000);

describe("watches at one replica of what another stored", () => {
  test("a pod reported at A reaches B's operator watch and kubectl-style watch, numbered as at A", async () => {
    const from = (await kubeList(b, "/api/v1/pods")).rv;
    const opsA = await operatorWatch(a, "pods,nodes");
    const opsB = await operatorWatch(b, "pods,nodes");
    const kubeB = await kubeWatch(b, `/api/v1/pods?resourceVersion=${from}`);
    try {
      agent.writeManifest("web.yaml", sleeperManifest("web", agent.tb.busybox));
      const name = `web-${agent.nodeName}`;
      const atA = await opsA.waitFor("the pod at A", named(name), 60_000);
      const atB = await opsB.waitFor("the pod on B's watch stream", named(name));
      const kube = await kubeB.waitFor("the pod on B's Kubernetes watch", named(name));
      expect(atB.type).toBe("ADDED");
      expect(kube.type).toBe("ADDED");
      console.log(
        `pod seen at B ${atB.at - atA.at} ms (watch stream) and ${kube.at - atA.at} ms (Kubernetes watch) after A's watch stream`,
      );
      const running = await kubeB.waitFor(
        "the pod running on B's Kubernetes watch",
        (e) =>
          named(name)(e) &&
          (e.object as { status?: { phase?: string } }).status?.phase === "Running",
        60_000,
      );
      // The same change carries the same resourceVersion at both replicas.
      await eventually("A and B serving the pod alike", async () => {
        const [atAList, atBList] = [
          await kubeList(a, "/api/v1/pods"),
          await kubeList(b, "/api/v1/pods"),
        ];
        const rvOf = (items: WatchEvent["object"][]) =>
          items.find((p) => p.metadata.name === name)?.metadata.resourceVersion;
        const same =
          rvOf(atAList.items) === rvOf(atBList.items) && rvOf(atBList.items) !== undefined;
        return (
          same && Number(rvOf(atBList.items)) >= Number(running.object.metadata.resourceVersion)
        );
      });
    } finally {
      for (const w of [opsA, opsB, kubeB]) w.close();
    }
  }, 120_000);

  test("a node held by A is online at B, and B does not mark it offline", async () => {
    const online = async () => {
      const res = await b.api(`/api/v1/nodes/${agent.nodeName}`);
      const node = (await res.json()) as WatchEvent["object"];
      return node.metadata.annotations?.["hub.fleetlet.io/online"];
    };
    expect(await eventually("the node online at B", async () => (await online()) === "true")).toBe(
      true,
    );
    // Three times the offline timeout (3 heartbeats of 1 s): B holds no connection of it.
    await Bun.sleep(9_000);
    expect(await online()).toBe("true");
  }, 60_000);

  test("a list at A, then a watch at B from its resourceVersion, misses nothing", async () => {
    const list = await kubeList(a, "/api/v1/pods");
    agent.writeManifest("second.yaml", sleeperManifest("second", agent.tb.busybox));
    const name = `second-${agent.nodeName}`;
    // The change is stored before B's watch opens: B replays it from what it read of the log.
    await eventually("the second pod at A", async () =>
      (await kubeList(a, "/api/v1/pods")).items.some((p) => p.metadata.name === name),
    );
    const w = await kubeWatch(b, `/api/v1/pods?resourceVersion=${list.rv}`);
    try {
      const added = await w.waitFor("the second pod from B's watch", named(name));
      expect(added.type).toBe("ADDED");
      expect(Number(added.object.metadata.resourceVersion)).toBeGreaterThan(Number(list.rv));
      // Nothing the list had is sent again as ADDED.
      const listed = new Set(list.items.map((p) => p.metadata.name));
      expect(
        w.events.filter((e) => e.type === "ADDED" && listed.has(e.object.metadata.name)),
      ).toEqual([]);
    } finally {
      w.close();
    }
  }, 60_000);
});

describe("deploy objects across replicas", () => {
  test("a ConfigMap, a Secret and a DaemonSet created at A are listed and watched at B", async () => {
    const cmWatch = await kubeWatch(b, "/api/v1/namespaces/default/configmaps");
    try {
      const post = (path: string, body: unknown) =>
        a.api(path, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(body),
        });
      const cm = await post("/api/v1/namespaces/default/configmaps", {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: "settings" },
        data: { mode: "fast" },
      });
      expect(cm.status).toBe(201);
      const created = (await cm.json()) as WatchEvent["object"];
      const seen = await cmWatch.waitFor("the ConfigMap on B's watch", named("settings"));
      expect(seen.type).toBe("ADDED");
      expect(seen.object.metadata.resourceVersion).toBe(created.metadata.resourceVersion);
      const secret = await post("/api/v1/namespaces/default/secrets", {
        apiVersion: "v1",
        kind: "Secret",
        metadata: { name: "db" },
        stringData: { password: "hunter2-replicas" },
      });
      expect(secret.status).toBe(201);
      const ds = await post("/apis/apps/v1/namespaces/default/daemonsets", {
        apiVersion: "apps/v1",
        kind: "DaemonSet",
        metadata: { name: "agentd" },
        spec: {
          selector: { matchLabels: { app: "agentd" } },
          template: {
            metadata: { labels: { app: "agentd" } },
            spec: {
              nodeSelector: { "no-such": "node" },
              containers: [{ name: "c", image: agent.tb.busybox }],
            },
          },
        },
      });
      expect(ds.status).toBe(201);
      const atB = await eventually("the Secret and the DaemonSet at B", async () => {
        const s = await b.api("/api/v1/namespaces/default/secrets/db");
        const d = await b.api("/apis/apps/v1/namespaces/default/daemonsets/agentd");
        return s.status === 200 && d.status === 200
          ? { s: await s.json(), d: await d.json() }
          : undefined;
      });
      const password = (atB.s as { data: Record<string, string> }).data.password;
      expect(Buffer.from(password ?? "", "base64").toString()).toBe("hunter2-replicas");
      expect((atB.d as { metadata: { generation: number } }).metadata.generation).toBe(1);
      // The Secret is in the log sealed, never in the clear.
      const sql = new SQL(url, { max: 1 });
      try {
        const rows = await sql.unsafe("SELECT object FROM changes WHERE kind = 'Secret'");
        expect(rows.length).toBeGreaterThan(0);
        for (const r of rows as { object: string }[]) {
          expect(r.object).not.toContain("hunter2");
          expect(r.object).not.toContain(Buffer.from("hunter2-replicas").toString("base64"));
        }
      } finally {
        await sql.close();
      }
      const del = await a.api("/api/v1/namespaces/default/configmaps/settings", {
        method: "DELETE",
      });
      expect(del.status).toBe(200);
      expect(
        (await cmWatch.waitFor("the deletion on B's watch", (e) => e.type === "DELETED")).object
          .metadata.name,
      ).toBe("settings");
    } finally {
      cmWatch.close();
    }
  }, 60_000);
});

describe("the log's trim", () => {
  test("a watch at B from a resourceVersion trimmed from the log is answered 410 Gone", async () => {
    const configMap = async (name: string) => {
      const res = await a.api("/api/v1/namespaces/default/configmaps", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ apiVersion: "v1", kind: "ConfigMap", metadata: { name } }),
      });
      expect(res.status).toBe(201);
      return Number(((await res.json()) as WatchEvent["object"]).metadata.resourceVersion);
    };
    // A resourceVersion B served, then a change after it, which the trim drops from the log.
    const first = await configMap("before-trim");
    const old = await eventually("B past the first ConfigMap", async () => {
      const rv = Number((await kubeList(b, "/api/v1/pods")).rv);
      return rv >= first ? rv : undefined;
    });
    await configMap("after-trim");
    await Bun.sleep((RETENTION_S + 3) * 1000);
    const gone = await eventually("410 Gone for the old resourceVersion", async () => {
      const w = await kubeWatch(b, `/api/v1/pods?resourceVersion=${old}`);
      try {
        const first = await w.waitFor("the first event", () => true, 5_000);
        return first.type === "ERROR" ? first : undefined;
      } finally {
        w.close();
      }
    });
    expect(gone.object.code).toBe(410);
  }, 60_000);
});

describe("NATS restarted", () => {
  test("B's watches keep receiving, and B serves what A serves after", async () => {
    const ops = await operatorWatch(b, "pods");
    const kube = await kubeWatch(
      b,
      `/api/v1/pods?resourceVersion=${(await kubeList(b, "/api/v1/pods")).rv}`,
    );
    try {
      const restarted = nats.restart({ downMs: 3_000 });
      agent.writeManifest("outage.yaml", sleeperManifest("outage", agent.tb.busybox));
      const name = `outage-${agent.nodeName}`;
      await ops.waitFor("the pod on B's watch stream while NATS restarts", named(name), 30_000);
      await kube.waitFor(
        "the pod on B's Kubernetes watch while NATS restarts",
        named(name),
        30_000,
      );
      await restarted;
      agent.writeManifest("after.yaml", sleeperManifest("after", agent.tb.busybox));
      const after = `after-${agent.nodeName}`;
      await ops.waitFor("a pod after the restart on B's watch stream", named(after), 30_000);
      await kube.waitFor("a pod after the restart on B's Kubernetes watch", named(after), 30_000);
      await eventually("B serving the pods as A does", async () => {
        const served = async (hub: TestHub) =>
          JSON.stringify(
            (await kubeList(hub, "/api/v1/pods")).items
              .map((p) => `${p.metadata.name}@${p.metadata.resourceVersion}`)
              .sort(),
          );
        return (await served(a)) === (await served(b));
      });
    } finally {
      ops.close();
      kube.close();
    }
  }, 90_000);
});
