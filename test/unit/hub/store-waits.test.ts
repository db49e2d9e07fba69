// The hub's parts over stores that take time, as a database across the network does: the
// deployer's passes and operator actions run one at a time, in the order asked, each awaiting
// its writes; an operator's write that fails leaves nothing in memory and maps to its Status;
// agent rollouts' passes and actions run one at a time too.
import { describe, expect, test } from "bun:test";
import type { DaemonSet } from "../../../src/api/daemonset.ts";
import { createLocalBus } from "../../../src/hub/bus.ts";
import { DeferredDeployWrites } from "../../../src/hub/deploy/deferred-store.ts";
import { Deployer } from "../../../src/hub/deploy/deployer.ts";
import type { DeployStore, PassWrites } from "../../../src/hub/deploy/store.ts";
import { SqliteDeployStore } from "../../../src/hub/deploy/store-sqlite.ts";
import { AgentRollouts } from "../../../src/hub/rollouts/controller.ts";
import type { AgentRollout } from "../../../src/hub/rollouts/spec.ts";
import { parseSpec } from "../../../src/hub/rollouts/spec.ts";
import { storeWriteStatus } from "../../../src/hub/store.ts";
import { openHubDatabase, SqliteHubStore } from "../../../src/hub/store-sqlite.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { testFleet } from "../../lib/hub-fleet.ts";
import { settle, updateHub } from "../../lib/hub-updates.ts";

/** Holds every write until open() (while `held`), and records when each starts and ends. */
class Gate {
  readonly log: string[] = [];
  held = true;
  private waiting: (() => void)[] = [];
  async pass<T>(name: string, write: () => Promise<T>): Promise<T> {
    this.log.push(`${name} start`);
    if (this.held) await new Promise<void>((resolve) => this.waiting.push(resolve));
    const r = await write();
    this.log.push(`${name} end`);
    return r;
  }
  open(): void {
    this.held = false;
    for (const w of this.waiting.splice(0)) w();
  }
}

const diskFull = () =>
  Object.assign(new Error("database or disk is full"), { code: "SQLITE_FULL" });

/** The deploy store on SQLite, its writes through `gate` (or failing while `failing`). */
function slowDeployStore(gate: Gate): DeployStore & { failing: boolean } {
  const inner = new SqliteDeployStore(openHubDatabase(":memory:"));
  const store = {
    failing: false,
    load: () => inner.load(),
    putObject: (...a: Parameters<DeployStore["putObject"]>) =>
      gate.pass("putObject", async () => {
        if (store.failing) throw diskFull();
        return inner.putObject(...a);
      }),
    deleteObject: (...a: Parameters<DeployStore["deleteObject"]>) =>
      gate.pass("deleteObject", () => inner.deleteObject(...a)),
    writePass: (p: PassWrites) => gate.pass("writePass", () => inner.writePass(p)),
  };
  return store;
}

async function deployerOver(store: DeployStore) {
  const clock = new FakeClock(Date.UTC(2026, 0, 1));
  const hubStore = new SqliteHubStore(":memory:");
  const fleet = testFleet(hubStore, await hubStore.load(), clock);
  return new Deployer({
    store: new DeferredDeployWrites(store, nullLogger, () => clock.now()),
    loaded: await store.load(),
    ...{ fleet, bus: createLocalBus(), clock, log: nullLogger },
    flushStore: () => hubStore.flush(),
    intervalMs: 1000,
  });
}

const daemonSet = (image: string): DaemonSet => ({
  apiVersion: "apps/v1",
  kind: "DaemonSet",
  metadata: { name: "web", namespace: "default" },
  spec: {
    selector: { matchLabels: { app: "web" } },
    template: {
      metadata: { labels: { app: "web" } },
      spec: { containers: [{ name: "m", image }] },
    },
  },
});

describe("the deployer over a store that takes time", () => {
  test("passes and operator actions run one at a time, in the order asked", async () => {
    const gate = new Gate();
    const deployer = await deployerOver(slowDeployStore(gate));
    const applied = deployer.apply(daemonSet("busybox:1"));
    const pass = deployer.reconcile();
    const changed = deployer.apply(daemonSet("busybox:2"));
    await settle();
    expect(gate.log).toEqual(["putObject start"]);
    expect(deployer.list()).toEqual([]);
    gate.open();
    await Promise.all([applied, pass, changed]);
    // The first apply's object, then its pass's new rollout record and status; the pass between
    // had nothing new to write; the second apply's object, then its pass's status (its
    // observedGeneration; no device).
    expect(gate.log).toEqual([
      ...["putObject start", "putObject end", "writePass start", "writePass end"],
      ...["putObject start", "putObject end", "writePass start", "writePass end"],
    ]);
    expect(deployer.get("default", "web")?.metadata.generation).toBe(2);
  });

  test("a DaemonSet whose write fails is not kept, and is refused with 507; taken once it works", async () => {
    const gate = new Gate();
    gate.open();
    const store = slowDeployStore(gate);
    const deployer = await deployerOver(store);
    store.failing = true;
    const err = await deployer.apply(daemonSet("busybox:1")).catch((e: unknown) => e);
    expect(storeWriteStatus(err, "POST /apis/apps/v1/namespaces/default/daemonsets")?.code).toBe(
      507,
    );
    expect(deployer.list()).toEqual([]);
    expect(await store.load()).toMatchObject({ objects: [], revisions: [] });
    store.failing = false;
    expect((await deployer.apply(daemonSet("busybox:1"))).result).toBe("created");
    const stored = await store.load();
    expect(stored.objects.map((o) => o.name)).toEqual(["web"]);
    expect(stored.revisions.map((r) => r.revision)).toEqual([1]);
  });
});

describe("agent rollouts over a store that takes time", () => {
  test("an action asked while a change is being stored runs after it and its pass", async () => {
    const h = await updateHub();
    h.releases.add("0.2.0", "arm64");
    const gate = new Gate();
    const saved: AgentRollout[] = [];
    const rollouts = new AgentRollouts(
      {
        store: {
          load: async () => [],
          change: (_name, change) =>
            gate.pass("save", async () => {
              const r = change(saved.at(-1));
              if (r) saved.push(structuredClone(r));
              return { stored: r ?? undefined };
            }),
        },
        nodes: () => [{ name: "cam-1", labels: { tier: "prod" } }],
        online: () => true,
        updates: h.updates,
        hasRelease: async () => true,
        changed: () => {},
        clock: h.clock,
        log: nullLogger,
      },
      [],
    );
    const put = rollouts.put("prod", parseSpec({ version: "0.2.0", selector: "tier=prod" }));
    await settle();
    const paused = rollouts.act("prod", "pause");
    await settle();
    expect(gate.log).toEqual(["save start"]);
    expect(h.updates.wantedFor("cam-1")).toBeUndefined();
    gate.open();
    expect((await put).result).toBe("created");
    expect((await paused).phase).toBe("Paused");
    // The put, its pass's record with cam-1's `from` (before cam-1 was wished 0.2.0), the pause.
    expect(gate.log).toEqual(Array(3).fill(["save start", "save end"]).flat());
    expect(saved.map((r) => [r.record.from, r.record.paused])).toEqual([
      [{}, false],
      [{ "cam-1": "0.1.0" }, false],
      [{ "cam-1": "0.1.0" }, true],
    ]);
    expect(h.updates.wantedFor("cam-1")?.version).toBe("0.2.0");
  });
});
