import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AGENT_CONFIG_DEFAULTS, type AgentConfig } from "../../../src/agent/config/index.ts";
import { createAgentGC } from "../../../src/agent/gc/index.ts";
import { createFakeRuntime } from "../../../src/cri/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { until } from "../../lib/until.ts";

let dir = "";
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe("createAgentGC()", () => {
  test("reclaim: the eviction manager's two steps, each saying what it freed", async () => {
    dir = mkdtempSync(join(tmpdir(), "fleetlet-agentgc-"));
    const config: AgentConfig = {
      ...AGENT_CONFIG_DEFAULTS,
      nodeName: "node1",
      rootDir: dir,
      cpuManagerStateFile: join(dir, "cpu"),
      imagesImportPath: join(dir, "images"),
      imageMinimumGCAge: 0,
    };
    const clock = new FakeClock();
    const cri = createFakeRuntime({ now: () => clock.now() });
    cri.images.add("example.com/unused:1", { size: 123 });
    const events: string[] = [];
    const gc = createAgentGC({
      config,
      cri,
      clock,
      logger: nullLogger,
      runtime: {
        removeContainer: async () => 0,
        stopContainer: async () => {},
        removeSandbox: async () => {},
      },
      recorder: {
        event: (o, type, reason) => events.push(`${o.kind}/${o.name} ${type} ${reason}`),
      },
      sourcesReady: () => true,
      podState: () => "active",
    });
    expect(await gc.reclaim.deleteAllUnusedContainers()).toEqual({
      containers: 0,
      sandboxes: 0,
      logBytes: 0,
    });
    expect(await gc.reclaim.deleteUnusedImages()).toEqual({ images: 1, bytes: 123 });
    expect(cri.images.present.size).toBe(0);
    cri.failNext("listContainers", new Error("down"));
    const ac = new AbortController();
    const loop = gc.containers.run(ac.signal);
    await until("the container GC loop to wait", () => clock.pending > 0);
    clock.step(config.containerGCPeriod);
    await until("a node event", () => events.length > 0);
    expect(events).toEqual(["Node/node1 Warning ContainerGCFailed"]);
    ac.abort();
    await loop;
  });
});
