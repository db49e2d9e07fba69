// Faults of hub replicas (docs/hub-replicas.md, "Agents and replicas"), with the compiled hub and
// agents, a real PostgreSQL (scripts/lib/postgres.ts) and nats-server (scripts/lib/nats.ts): two
// devices whose agents have the list of both replicas, which join at one while the other is
// already up (it learns them from the change log). A replica killed with SIGKILL: its devices
// report through the other, each once, no container restarted, nothing stored before the kill
// lost, and the killed replica started again serves them whole. PostgreSQL stopped for a while
// (FLEETLET_E2E_PG_DOWN_S, default 30 s) under both: they stay up, reads answer, writes answer 503
// saying why, and what the devices reported meanwhile is stored once it is back. At the protocol
// level, a device that connects to the other replica is let go by the first. And an operator's
// label set at the replica that does not hold the node survives the holder's writes.
// Needs root, the test bed and scripts/build.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SQL } from "bun";
import { type NatsServer, startNatsServer } from "../../scripts/lib/nats.ts";
import { PostgresCluster } from "../../scripts/lib/postgres.ts";
import type { Node } from "../../src/api/node.ts";
import type { Pod } from "../../src/api/types.ts";
import { TestAgent } from "../lib/agent.ts";
import { nodeReport, ProtocolClient, TestHub } from "../lib/hub.ts";
import { sleeperManifest } from "../lib/manifests.ts";
import { closedPorts, startReplica } from "../lib/replicas.ts";
import { eventually } from "../lib/testbed.ts";

const PG_DOWN_MS = Number(process.env.FLEETLET_E2E_PG_DOWN_S ?? "30") * 1000;

let pg: PostgresCluster;
let nats: NatsServer;
let db: SQL;
const dir = mkdtempSync(join(tmpdir(), "fleetlet-replica-faults-e2e-"));
const keyFile = join(dir, "secrets.key");
const hubs: TestHub[] = [];
const agents: TestAgent[] = [];

/** A replica on a fixed loopback port (so it starts again on the same URL). */
function replica(url: string, id: string, port: number): TestHub {
  const args = ["--store", url, "--bus", nats.url, "--secrets-key-file", keyFile];
  const hub = new TestHub(
    [...args, "--replica-id", id, "--heartbeat-interval", "1s"],
    "127.0.0.1",
    true,
  );
  hub.port = port;
  hubs.push(hub);
  return hub;
}

beforeAll(async () => {
  pg = await PostgresCluster.start();
  nats = await startNatsServer();
  writeFileSync(keyFile, `${Buffer.alloc(32, 9).toString("base64")}\n`, { mode: 0o600 });
}, 60_000);
afterAll(async () => {
  for (const a of agents) await a.cleanup();
  for (const h of hubs) await h.cleanup();
  await db?.close();
  await nats?.stop();
  await pg?.remove();
  rmSync(dir, { recursive: true, force: true });
}, 120_000);

const ONLINE = "hub.fleetlet.io/online";

/** The node as `hub` serves it, once online there. */
function onlineAt(hub: TestHub, name: string, timeoutMs = 30_000): Promise<Node> {
  return eventually(
    `node ${name} online at ${hub.url}`,
    async () => {
      const res = await hub.api(`/api/v1/nodes/${name}`);
      const node = res.status === 200 ? ((await res.json()) as Node) : undefined;
      return node?.metadata.annotations?.[ONLINE] === "true" ? node : undefined;
    },
    timeoutMs,
    200,
  );
}

/** The replica that holds `node` in node_sessions, and its epoch. */
async function holder(node: string): Promise<{ replica: string; epoch: number } | undefined> {
  const [row] = await db.unsafe(
    "SELECT replica, epoch::int AS epoch FROM node_sessions WHERE node = $1",
    [node],
  );
  return row;
}

/** Whether the store holds pod `name` (the manifest's name) of `agent`. */
async function storedPod(agent: TestAgent, name: string): Promise<boolean> {
  const rows = await db.unsafe(
    "SELECT 1 FROM pods WHERE node = $1 AND pod->'metadata'->>'name' = $2",
    [agent.nodeName, `${name}-${agent.nodeName}`],
  );
  return rows.length > 0;
}

/** Each agent's `web` container as the device runs it: its id and restart count. */
async function webContainers(): Promise<[string | undefined, number | undefined][]> {
  const out: [string | undefined, number | undefined][] = [];
  for (const a of agents) {
    const pod = (await a.pod("web")) as Pod;
    const c = pod.status?.containerStatuses?.[0];
    out.push([c?.containerID, c?.restartCount]);
  }
  return out;
}

describe("hub replicas under faults (needs root and the test bed)", () => {
  // A: the replica holding the first device once the devices run (each tries the URLs of its
  // list in a random order, and either replica takes their join); B: the other.
  let a: TestHub;
  let b: TestHub;
  let idA = "hub-a";
  let idB = "hub-b";

  test("a replica killed with SIGKILL: its devices report through the other, nothing lost or restarted; started again, it serves them whole", async () => {
    const url = await pg.createDatabase();
    db = new SQL(url, { max: 1 });
    const [portA, portB] = (await closedPorts(2)) as [number, number];
    a = replica(url, "hub-a", portA);
    b = replica(url, "hub-b", portB);
    // Both are up before the devices join: the replica a device did not join through learns its
    // node and credential from the change log, so it welcomes the device when the other is killed.
    await startReplica(b);
    await startReplica(a);
    const hubList = `https://127.0.0.1:${portA},https://127.0.0.1:${portB}`;
    const token = await a.joinToken();
    for (let i = 0; i < 2; i++) {
      const agent = new TestAgent({
        args: [
          ...["--hub", hubList, "--join-token", token],
          ...["--hub-reconnect-back-off-base", "200ms", "--hub-reconnect-back-off-max", "1s"],
          ...["--node-status-update-frequency", "1s"],
        ],
      });
      agents.push(agent);
      await agent.start();
      agent.writeManifest("web.yaml", sleeperManifest("web", agent.tb.busybox));
    }
    for (const agent of agents) await a.runningPod(agent.nodeName, "web");
    for (const agent of agents) await b.runningPod(agent.nodeName, "web");
    if ((await holder(agents[0]?.nodeName ?? ""))?.replica === "hub-b") {
      [a, b, idA, idB] = [b, a, idB, idA];
    }
    expect((await holder(agents[0]?.nodeName ?? ""))?.replica).toBe(idA);
    const before = await webContainers();
    const [first, second] = agents as [TestAgent, TestAgent];
    // A report stored (so acknowledged) just before the kill.
    first.writeManifest("acked.yaml", sleeperManifest("acked", first.tb.busybox));
    await eventually("the acked pod stored", () => storedPod(first, "acked"), 30_000, 200);

    const killedAt = Date.now();
    await a.kill();
    for (const agent of agents) {
      await onlineAt(b, agent.nodeName, 60_000);
      await eventually(
        "B to hold the node",
        async () => ((await holder(agent.nodeName))?.replica === idB ? true : undefined),
        60_000 - (Date.now() - killedAt),
        200,
      );
    }
    const failoverMs = Date.now() - killedAt;
    console.log(`both devices online through the other replica ${failoverMs} ms after SIGKILL`);
    expect(failoverMs).toBeLessThan(60_000);

    const res = await b.api("/api/v1/nodes");
    const names = ((await res.json()) as { items: Node[] }).items.map((n) => n.metadata.name);
    expect(names.sort()).toEqual(agents.map((x) => x.nodeName).sort());
    expect(await storedPod(first, "acked")).toBe(true);
    await b.runningPod(first.nodeName, "acked");
    second.writeManifest("after.yaml", sleeperManifest("after", second.tb.busybox));
    await b.runningPod(second.nodeName, "after");
    expect(await webContainers()).toEqual(before);

    // A started again on the same URL and data folder: it serves what B stored, and takes the
    // devices back when B stops.
    await startReplica(a);
    expect((await fetch(`${a.url}/readyz`, a.fetchTls())).status).toBe(200);
    await a.runningPod(second.nodeName, "after");
    await b.stop();
    // A follows B's rows, so it may show a node online (as B stored it) before it holds it.
    for (const agent of agents) {
      await onlineAt(a, agent.nodeName, 60_000);
      await eventually(
        "A to hold the node again",
        async () => ((await holder(agent.nodeName))?.replica === idA ? true : undefined),
        60_000,
        200,
      );
    }
    second.writeManifest("back.yaml", sleeperManifest("back", second.tb.busybox));
    await a.runningPod(second.nodeName, "back");
    expect(await webContainers()).toEqual(before);
  }, 300_000);

  test(`PostgreSQL stopped for ${PG_DOWN_MS / 1000} s: replicas stay up, reads answer, writes answer 503; what happened meanwhile is stored after`, async () => {
    await startReplica(b);
    const before = await webContainers();
    const [first] = agents as [TestAgent];
    await pg.stopServer();
    const downAt = Date.now();
    let checks = 0;
    try {
      first.writeManifest("during.yaml", sleeperManifest("during", first.tb.busybox));
      await first.waitPod("during", "Running", (p) => p.status?.phase === "Running");
      await eventually(
        "A's /readyz to fail",
        async () => (await fetch(`${a.url}/readyz`, a.fetchTls())).status === 503 || undefined,
        PG_DOWN_MS,
        200,
      );
      do {
        for (const hub of [a, b]) {
          expect(hub.proc?.exitCode).toBeNull();
          const nodes = await hub.api("/api/v1/nodes");
          expect(nodes.status).toBe(200);
          expect(((await nodes.json()) as { items: Node[] }).items).toHaveLength(2);
          const write = await hub.api("/api/v1/join-tokens", {
            method: "POST",
            body: JSON.stringify({ ttl: "1h", labels: {} }),
          });
          expect(write.status).toBe(503);
          const text = await write.text();
          expect(text).toContain("was not stored: the hub cannot reach its PostgreSQL database");
          if (checks === 0) console.log(`a write while PostgreSQL is down: ${text}`);
          // A node's label change, at its holder and at the other replica, is refused too (it
          // was answered 200 with the change only queued), and the node keeps its labels.
          const patch = await hub.api(`/api/v1/nodes/${first.nodeName}`, {
            method: "PATCH",
            headers: { "content-type": "application/merge-patch+json" },
            body: JSON.stringify({ metadata: { labels: { "e2e.fleetlet.io/down": "yes" } } }),
          });
          expect(patch.status).toBe(503);
          expect(await patch.text()).toContain(
            "was not stored: the hub cannot reach its PostgreSQL database",
          );
          const node = (await (await hub.api(`/api/v1/nodes/${first.nodeName}`)).json()) as Node;
          expect(node.metadata.labels?.["e2e.fleetlet.io/down"]).toBeUndefined();
          // The join tokens are listed from what the replica holds.
          expect((await hub.api("/api/v1/join-tokens")).status).toBe(200);
        }
        checks++;
        await Bun.sleep(2_000);
      } while (Date.now() - downAt < PG_DOWN_MS);
      // What the device reported meanwhile is shown by its holder.
      await a.runningPod(first.nodeName, "during");
    } finally {
      await pg.startServer();
    }
    console.log(`PostgreSQL was down ${Date.now() - downAt} ms; ${checks} rounds of checks`);
    await eventually("the pod reported meanwhile stored", () => storedPod(first, "during"), 60_000);
    for (const hub of [a, b]) {
      await eventually(
        `${hub.url}/readyz ok again`,
        async () => (await fetch(`${hub.url}/readyz`, hub.fetchTls())).status === 200 || undefined,
        60_000,
        200,
      );
      const write = await eventually(
        "a write to work again",
        async () => {
          const r = await hub.api("/api/v1/join-tokens", {
            method: "POST",
            body: JSON.stringify({ ttl: "1h", labels: {} }),
          });
          return r.status === 201 ? r.status : undefined;
        },
        30_000,
        500,
      );
      expect(write).toBe(201);
    }
    for (const agent of agents) await onlineAt(a, agent.nodeName);
    expect(await webContainers()).toEqual(before);
    // The refused label change was not written later either.
    const [row] = await db.unsafe(
      "SELECT progress->'hubLabels'->>'e2e.fleetlet.io/down' AS down FROM nodes WHERE name = $1",
      [first.nodeName],
    );
    expect(row.down).toBeNull();
  }, 300_000);

  test("a device that connects to another replica is let go by the one that held it (taken, on the bus)", async () => {
    const name = "proto-1";
    const credential = await a.credentialFor(name);
    // B, up since before this join at A, has the node and its credential from the change log.
    const hello = { type: "hello", protocolVersion: 1, nodeName: name, agentVersion: "e2e" };
    const atA = new ProtocolClient(a.url, credential, a.caPem);
    await atA.opened;
    atA.send({ ...hello, streamId: "s1" });
    expect(await atA.waitFor("welcome")).toMatchObject({ ackedSeq: 0 });
    atA.send(nodeReport(name));
    await atA.waitFor("ack");
    const atB = new ProtocolClient(b.url, credential, b.caPem);
    await atB.opened;
    atB.send({ ...hello, streamId: "s1" });
    // B resumes from what A stored, and A closes its connection once it hears B took the node.
    expect(await atB.waitFor("welcome")).toMatchObject({ ackedSeq: 1 });
    const closed = await atA.waitClosed(10_000);
    expect(closed.code).toBe(4409);
    expect(closed.reason).toContain("connected to another hub replica");
    expect(await holder(name)).toEqual({ replica: idB, epoch: 2 });
    // A does not mark the node offline, now or once it was silent there past the offline time
    // (three heartbeats of 1 s): it is online at B, where its agent goes on with heartbeats (B
    // would mark a silent one offline, and store it: A would show that).
    const beat = setInterval(() => atB.send({ type: "hb" }), 500);
    await Bun.sleep(4_000);
    clearInterval(beat);
    const atAView = (await (await a.api(`/api/v1/nodes/${name}`)).json()) as Node;
    expect(atAView.metadata.annotations?.[ONLINE]).toBe("true");
    expect(atB.closed).toBeUndefined();
    atB.close();
  }, 60_000);

  test("an operator's label on a node, set at the replica that does not hold it, survives the holder's next writes", async () => {
    const [first] = agents as [TestAgent];
    const name = first.nodeName;
    expect((await holder(name))?.replica).toBe(idA);
    const stored = async () => {
      const [row] = await db.unsafe(
        "SELECT (progress->>'ackedSeq')::int AS seq, progress->'hubLabels'->>'e2e.fleetlet.io/zone' AS zone FROM nodes WHERE name = $1",
        [name],
      );
      return row as { seq: number; zone: string | null };
    };
    const res = await b.api(`/api/v1/nodes/${name}`, {
      method: "PATCH",
      headers: { "content-type": "application/merge-patch+json" },
      body: JSON.stringify({ metadata: { labels: { "e2e.fleetlet.io/zone": "b" } } }),
    });
    expect(res.status).toBe(200);
    const zone = async (hub: TestHub) => {
      const node = (await (await hub.api(`/api/v1/nodes/${name}`)).json()) as Node;
      return node.metadata.labels?.["e2e.fleetlet.io/zone"];
    };
    await eventually(
      "B's write stored",
      async () => ((await stored()).zone === "b" ? true : undefined),
      30_000,
      200,
    );
    // The holder has it from the change log.
    await eventually(
      "A to show the label",
      async () => (await zone(a)) === "b" || undefined,
      30_000,
      200,
    );
    const after = (await stored()).seq;
    // The device reports a new pod through the holder, which writes the node's progress again.
    first.writeManifest("labelled.yaml", sleeperManifest("labelled", first.tb.busybox));
    await a.runningPod(name, "labelled");
    await eventually(
      "the holder to write the node again",
      async () => ((await stored()).seq > after ? true : undefined),
      30_000,
      200,
    );
    expect((await stored()).zone).toBe("b");
    for (const hub of [a, b]) expect(await zone(hub)).toBe("b");
  }, 60_000);
});
