// Agent rollouts in memory, for the unit tests of src/hub/rollouts/: a world of nodes (labels,
// online, revoked, the version their agent runs), the real per-node updates and rollout
// controller over one database (":memory:" or a file, to reopen as a restarted hub would), fake
// releases, and the nodes whose wish changed (what the hub would offer).
import { AgentRollouts } from "../../src/hub/rollouts/controller.ts";
import { parseSpec } from "../../src/hub/rollouts/spec.ts";
import { SqliteAgentRolloutStore } from "../../src/hub/rollouts/store-sqlite.ts";
import { openHubDatabase } from "../../src/hub/store-sqlite.ts";
import { SqliteUpdateStore } from "../../src/hub/updates/store-sqlite.ts";
import { NodeUpdates } from "../../src/hub/updates/updates.ts";
import type { UpdatePhase } from "../../src/protocol/index.ts";
import { AGENT_FEATURES } from "../../src/protocol/index.ts";
import { FakeClock } from "../../src/util/clock.ts";
import { nullLogger } from "../../src/util/log.ts";
import { FakeReleases } from "./hub-updates.ts";

interface WorldNode {
  labels: Record<string, string>;
  online: boolean;
  revoked: boolean;
  /** The version its agent runs. */
  version: string;
}

async function parts(
  path: string,
  world: Map<string, WorldNode>,
  clock: FakeClock,
  releases: FakeReleases,
) {
  const db = openHubDatabase(path);
  const changed: string[] = [];
  const updateStore = new SqliteUpdateStore(db);
  const rolloutStore = new SqliteAgentRolloutStore(db);
  const updates = new NodeUpdates(
    {
      store: updateStore,
      releases,
      node: (n) => {
        const w = world.get(n);
        return w === undefined ? undefined : { arch: "arm64", version: w.version };
      },
      now: () => clock.now(),
    },
    await updateStore.load(),
  );
  const rollouts = new AgentRollouts(
    {
      store: rolloutStore,
      nodes: () =>
        [...world.entries()]
          .filter(([, w]) => !w.revoked)
          .map(([name, w]) => ({ name, labels: w.labels })),
      online: (n) => world.get(n)?.online === true,
      updates,
      hasRelease: async (v) => (await releases.list()).some((r) => r.version === v),
      changed: (n) => changed.push(n),
      clock,
      log: nullLogger,
    },
    await rolloutStore.load(),
  );
  return { db, rolloutStore, updates, rollouts, changed };
}

/** A world with `names` online, running 0.1.0, labelled `tier=prod`; releases 0.2.0 and 0.3.0. */
export async function rolloutWorld(names: string[], path = ":memory:") {
  const clock = new FakeClock(Date.UTC(2026, 5, 1, 12));
  const world = new Map<string, WorldNode>(
    names.map((n) => [
      n,
      { labels: { tier: "prod" }, online: true, revoked: false, version: "0.1.0" },
    ]),
  );
  const releases = new FakeReleases();
  for (const v of ["0.2.0", "0.3.0"]) releases.add(v, "arm64");
  let p = await parts(path, world, clock, releases);
  return {
    clock,
    world,
    releases,
    /** The rollouts' store, as the hub would read it. */
    get rolloutStore() {
      return p.rolloutStore;
    },
    get updates() {
      return p.updates;
    },
    get rollouts() {
      return p.rollouts;
    },
    get changed() {
      return p.changed;
    },
    /** PUTs rollout `name` with `spec` (defaults filled in as the API does). */
    put: (name: string, spec: Record<string, unknown>) => p.rollouts.put(name, parseSpec(spec)),
    /** The wish of every node, "-" for none. */
    wishes: () =>
      Object.fromEntries([...world.keys()].map((n) => [n, p.updates.wantedFor(n)?.version ?? "-"])),
    /** The agent of `node` reports `phase` of `version` (and runs it when healthy). */
    report(node: string, version: string, phase: UpdatePhase, reason?: string) {
      p.updates.report(node, { type: "update.status", version, phase, ...(reason && { reason }) });
      const w = world.get(node);
      if (w !== undefined && phase === "healthy") w.version = version;
    },
    /** The agent of `node` says hello and is offered its wish (as a connected agent is). */
    async connect(node: string) {
      p.updates.hello(node, world.get(node)?.version ?? "0.1.0", [AGENT_FEATURES.updates]);
      return p.updates.offer(node);
    },
    /** A hub restart: everything reopened from the database file. */
    async reopen() {
      p.db.close();
      p = await parts(path, world, clock, releases);
    },
  };
}
