// A hub's agent-update parts in memory, for the unit tests of src/hub/updates/: a store, a fleet
// with node "cam-1" joined (arm64, running 0.1.0), fake releases, the sessions and one agent
// socket whose sent messages are recorded.

import type { Node } from "../../src/api/node.ts";
import { AuditLog } from "../../src/hub/audit.ts";
import { SqliteAuditStore } from "../../src/hub/audit-sqlite.ts";
import { Identity } from "../../src/hub/identity.ts";
import type { ReleaseInfo, StoredRelease } from "../../src/hub/releases/store.ts";
import { SqliteAgentRolloutStore } from "../../src/hub/rollouts/store-sqlite.ts";
import { AgentSessions, type AgentSocket } from "../../src/hub/sessions.ts";
import { openHubDatabase, SqliteHubStore } from "../../src/hub/store-sqlite.ts";
import { openNodeUpdates } from "../../src/hub/updates/open.ts";
import { SqliteUpdateStore } from "../../src/hub/updates/store-sqlite.ts";
import { AGENT_FEATURES, PROTOCOL_VERSION } from "../../src/protocol/index.ts";
import { FakeClock } from "../../src/util/clock.ts";
import { nullLogger } from "../../src/util/log.ts";
import { testFleet } from "./hub-fleet.ts";

/** A manifest's text for release `version`/`arch` (its form only matters to the agent). */
export const manifestText = (version: string, arch: string) =>
  `fleetlet-release: 1\nversion: ${version}\narch: ${arch}\nsize: 1\nsha256: ${"0".repeat(64)}\nsignature: x\n`;

/** Releases held in memory: "version/arch" → stored. */
export class FakeReleases {
  readonly stored = new Map<string, StoredRelease>();

  add(version: string, arch: "amd64" | "arm64"): void {
    this.stored.set(`${version}/${arch}`, {
      version,
      arch,
      size: 1,
      sha256: "0".repeat(64),
      signature: new Uint8Array(64),
      compressedSize: 1,
      pushedAt: "2026-06-01T12:00:00Z",
      manifest: manifestText(version, arch),
    } as StoredRelease);
  }

  async get(version: string, arch: string): Promise<StoredRelease | undefined> {
    return this.stored.get(`${version}/${arch}`);
  }

  async list(): Promise<ReleaseInfo[]> {
    return [...this.stored.values()];
  }
}

/** Sets the Node that `name` reported: its arch and kubelet version. */
function reportNode(rec: { node?: Node } | undefined, arch: string | null): void {
  if (rec === undefined) return;
  rec.node = {
    apiVersion: "v1",
    kind: "Node",
    metadata: { name: "cam-1" },
    status: {
      nodeInfo: { ...(arch !== null && { architecture: arch }), kubeletVersion: "fleetlet/0.1.0" },
    },
  } as unknown as Node;
}

/** The update parts over `path` (":memory:" or a file, to reopen), node "cam-1" of `arch`
 * (null: not reported yet). */
export async function updateHub(path = ":memory:", arch: string | null = "arm64") {
  const clock = new FakeClock(Date.UTC(2026, 5, 1, 12));
  const db = openHubDatabase(path);
  const store = new SqliteHubStore(db);
  const loaded = await store.load();
  const fleet = testFleet(store, loaded, clock);
  const identity = new Identity({ store, nodes: fleet.nodes, now: () => clock.now() }, loaded);
  const operatorToken = await identity.ensureOperatorToken();
  let credential = "";
  if (!fleet.nodes.has("cam-1")) {
    const tok = await identity.createJoinToken(60_000, {}, clock.now());
    credential = (await identity.join({ joinToken: tok.token, nodeName: "cam-1" }, clock.now()))
      .credential;
  }
  reportNode(fleet.nodes.get("cam-1"), arch);
  const releases = new FakeReleases();
  const updates = await openNodeUpdates(
    new SqliteUpdateStore(db),
    releases,
    fleet,
    clock,
    nullLogger,
  );
  const audit = new AuditLog(new SqliteAuditStore(db), () => clock.now());
  const sessions = new AgentSessions({
    fleet,
    identity,
    clock,
    log: nullLogger,
    heartbeatIntervalMs: 10_000,
    maxMessageBytes: 1 << 20,
    rateLimit: { messagesPerSecond: 100, burst: 100 },
    helloTimeoutMs: 5000,
    markDirty: () => {},
    flushNow: () => {},
    updates,
  });
  return {
    clock,
    store,
    fleet,
    identity,
    operatorToken,
    credential,
    releases,
    updates,
    audit,
    /** The agent rollouts' store on the same database. */
    rolloutStore: new SqliteAgentRolloutStore(db),
    sessions,
  };
}

/** An agent connection of "cam-1" to `sessions`: what the hub sent it, and `say`. */
export function agentSocket(sessions: AgentSessions, credential: string) {
  const sent: Record<string, unknown>[] = [];
  const ws: AgentSocket = {
    data: sessions.newData(credential, true),
    send: (t) => sent.push(JSON.parse(String(t))),
    close() {},
  };
  sessions.open(ws);
  const say = (m: object) => sessions.message(ws, JSON.stringify(m));
  const hello = (agentVersion = "0.1.0", features: string[] = [AGENT_FEATURES.updates]) =>
    say({
      type: "hello",
      protocolVersion: PROTOCOL_VERSION,
      nodeName: "cam-1",
      agentVersion,
      streamId: "s1",
      features,
    });
  const updatesSent = () => sent.filter((m) => m.type === "update");
  return { ws, sent, say, hello, updatesSent, close: () => sessions.close(ws) };
}

/** Lets the offers under way (promises of the fake releases) finish. */
export const settle = () => new Promise((resolve) => setImmediate(resolve));
