// A fleet of devices for tests of the deployer that do not go through sessions: devices join a
// hub store (SQLite in a folder), connect, and run what their desired state says (they ack its
// generation and report its pods Ready), as test/unit/hub/deployer.test.ts's devices do.
import { join } from "node:path";
import type { DaemonSet } from "../../src/api/daemonset.ts";
import type { Pod } from "../../src/api/types.ts";
import type { Deployer } from "../../src/hub/deploy/deployer.ts";
import type { Fleet } from "../../src/hub/fleet.ts";
import { Identity } from "../../src/hub/identity.ts";
import { openHubDatabase, SqliteHubStore } from "../../src/hub/store-sqlite.ts";
import type { FakeClock } from "../../src/util/clock.ts";
import { reportedStatus } from "./deploy.ts";
import { testFleet } from "./hub-fleet.ts";

export interface TestDevices {
  fleet: Fleet;
  store: SqliteHubStore;
  join(name: string, labels: Record<string, string>): Promise<void>;
  /** Each device acks its desired state from `deployer` and reports its pods Ready. */
  run(deployer: Deployer, names: string[]): void;
}

export async function testDevices(dir: string, clock: FakeClock): Promise<TestDevices> {
  const store = new SqliteHubStore(openHubDatabase(join(dir, "hub.db")));
  const loaded = await store.load();
  const fleet = testFleet(store, loaded, clock);
  const identity = new Identity({ store, nodes: fleet.nodes }, loaded);
  const seqs = new Map<string, number>();
  return {
    fleet,
    store,
    async join(name, labels) {
      const tok = await identity.createJoinToken(60_000, labels, clock.now());
      await identity.join({ joinToken: tok.token, nodeName: name }, clock.now());
      const features = ["desired-pods", "desired-config"];
      const hello = { type: "hello" as const, protocolVersion: 1, nodeName: name };
      fleet.connect(
        name,
        { ...hello, agentVersion: "t", streamId: `s-${name}`, features },
        clock.now(),
      );
    },
    run(deployer, names) {
      for (const name of names) {
        const rec = fleet.nodes.get(name);
        fleet.setDesiredAck(name, { generation: rec?.desiredGeneration ?? 0 });
        const text = deployer.desiredFor(name, undefined, true);
        const pods = text === undefined ? [] : (JSON.parse(text) as { pods: Pod[] }).pods;
        for (const pod of pods) {
          const seq = (seqs.get(name) ?? 0) + 1;
          seqs.set(name, seq);
          const uid = pod.metadata.uid ?? "";
          const status = reportedStatus(false);
          fleet.ingest(name, { type: "pod.upsert", seq, uid, pod: { ...pod, status } });
        }
      }
    },
  };
}

/** DaemonSet "web" of `image` on the devices labelled site=a, one device at a time. */
export function webDaemonSet(image: string): DaemonSet {
  return {
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata: { name: "web", namespace: "default" },
    spec: {
      selector: { matchLabels: { app: "web" } },
      template: {
        metadata: { labels: { app: "web" } },
        spec: { nodeSelector: { site: "a" }, containers: [{ name: "main", image }] },
      },
    },
  };
}
