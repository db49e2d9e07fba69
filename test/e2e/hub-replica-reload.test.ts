// A hub replica that fell behind the change log's trim (docs/hub-replicas.md, step 3): replica B
// is frozen (SIGSTOP) while replica A stores a node's join and a ConfigMap and trims their rows
// past a short retention; B, continued, finds the log trimmed past what it read, loads its view
// again from the store (the node and the ConfigMap are served), ends its Kubernetes watches with
// 410 Gone, answers 410 to a watch from before, and follows on from the log (a node joined after
// is served too). Compiled replicas, real PostgreSQL (scripts/lib/postgres.ts) and nats-server
// (scripts/lib/nats.ts); needs root and scripts/build, no containerd.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SQL } from "bun";
import { type NatsServer, startNatsServer } from "../../scripts/lib/nats.ts";
import { PostgresCluster } from "../../scripts/lib/postgres.ts";
import { TestHub } from "../lib/hub.ts";
import { kubeList, kubeWatch } from "../lib/hub-watches.ts";
import { startReplica } from "../lib/replicas.ts";
import { eventually } from "../lib/testbed.ts";

const RETENTION_S = 2;
let pg: PostgresCluster;
let nats: NatsServer;
let url = "";
const dir = mkdtempSync(join(tmpdir(), "fleetlet-replica-reload-e2e-"));
const keyFile = join(dir, "secrets.key");
let a: TestHub;
let b: TestHub;

function replica(id: string): TestHub {
  return new TestHub(
    [
      ...["--store", url, "--bus", nats.url, "--secrets-key-file", keyFile],
      ...["--replica-id", id, "--change-log-retention", `${RETENTION_S}s`],
    ],
    "127.0.0.1",
    true,
  );
}

beforeAll(async () => {
  pg = await PostgresCluster.start();
  nats = await startNatsServer();
  writeFileSync(keyFile, `${Buffer.alloc(32, 5).toString("base64")}\n`, { mode: 0o600 });
  url = await pg.createDatabase();
  a = replica("hub-a");
  await startReplica(a);
  b = replica("hub-b");
  await startReplica(b);
}, 120_000);
afterAll(async () => {
  b?.proc?.kill("SIGCONT");
  for (const h of [a, b]) await h?.cleanup();
  await nats?.stop();
  await pg?.remove();
  rmSync(dir, { recursive: true, force: true });
}, 60_000);

const served = (hub: TestHub, path: string) =>
  eventually(
    `${path} at ${hub.url}`,
    async () => ((await hub.api(path)).status === 200 ? true : undefined),
    20_000,
    100,
  );

describe("a replica behind the change log's trim", () => {
  test("loads its view again from the store, ends its watches with 410, and follows on", async () => {
    expect((await a.join(await a.joinToken(), "before")).status).toBe(200);
    await served(b, "/api/v1/nodes/before");
    const { rv } = await kubeList(b, "/api/v1/nodes");
    const live = await kubeWatch(b, `/api/v1/nodes?resourceVersion=${rv}`);
    const db = new SQL(url, { max: 1 });
    try {
      b.proc?.kill("SIGSTOP");
      try {
        expect((await a.join(await a.joinToken(), "during")).status).toBe(200);
        const cm = await a.api("/api/v1/namespaces/default/configmaps", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            apiVersion: "v1",
            kind: "ConfigMap",
            metadata: { name: "during" },
          }),
        });
        expect(cm.status).toBe(201);
        const cmRv = Number(
          ((await cm.json()) as { metadata: { resourceVersion: string } }).metadata.resourceVersion,
        );
        // A trims the rows B did not read.
        await eventually(
          "A's trim past the ConfigMap's row",
          async () => {
            const [row] = await db.unsafe(
              "SELECT value::bigint AS floor FROM meta WHERE key = 'changes_floor'",
            );
            return Number(row?.floor ?? 0) >= cmRv ? true : undefined;
          },
          (RETENTION_S + 10) * 1000,
          200,
        );
      } finally {
        b.proc?.kill("SIGCONT");
      }
      await served(b, "/api/v1/nodes/during");
      await served(b, "/api/v1/namespaces/default/configmaps/during");
      await eventually(
        "B to log its reload",
        () => b.output.includes("loading its view again from the store") || undefined,
        10_000,
        100,
      );
      // The watch open across the reload ends with 410 Gone, as does one from before it.
      const ended = await live.waitFor("the live watch's end", (e) => e.type === "ERROR", 20_000);
      expect(ended.object.code).toBe(410);
      const old = await kubeWatch(b, `/api/v1/nodes?resourceVersion=${rv}`);
      try {
        const first = await old.waitFor("the old watch's first event", () => true, 10_000);
        expect(first.type).toBe("ERROR");
        expect(first.object.code).toBe(410);
      } finally {
        old.close();
      }
      // It follows the log on: a list and a watch from it get what comes after.
      const after = await kubeList(b, "/api/v1/nodes");
      expect(after.items.map((n) => n.metadata.name).sort()).toEqual(["before", "during"]);
      const next = await kubeWatch(b, `/api/v1/nodes?resourceVersion=${after.rv}`);
      try {
        expect((await a.join(await a.joinToken(), "after")).status).toBe(200);
        await next.waitFor("the node joined after", (e) => e.object.metadata.name === "after");
        await served(b, "/api/v1/nodes/after");
      } finally {
        next.close();
      }
    } finally {
      live.close();
      await db.close();
    }
  }, 120_000);
});
