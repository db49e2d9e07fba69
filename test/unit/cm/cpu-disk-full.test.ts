// The CPU manager when its checkpoint cannot be written (a full disk; here a folder in the way of
// its temp file, which fails the write the same way without root): it starts, admits, says the failure, and writes
// the checkpoint at the next housekeeping once writes work again.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type CpuTopology, createCpuManager } from "../../../src/agent/cm/index.ts";
import type { StateWrites } from "../../../src/agent/events/state-writes.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";

const dir = mkdtempSync(join(tmpdir(), "fleetlet-cpu-full-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const four: CpuTopology = { cpus: [0, 1, 2, 3].map((id) => ({ id, core: id, socket: 0 })) };

function guaranteedPod(name: string, cpu: string) {
  const resources = { requests: { cpu, memory: "64Mi" }, limits: { cpu, memory: "64Mi" } };
  return makePod({
    metadata: { name, namespace: "default", uid: `uid-${name}` },
    spec: { containers: [makeContainer({ name: "main", resources })] },
  });
}

describe("CPU manager on a disk that cannot be written", () => {
  test("starts and admits with the state in memory, says the file, and catches up later", () => {
    const stateFile = join(dir, "cpu_manager_state");
    const blocker = `${stateFile}.tmp`;
    mkdirSync(blocker);
    const said: string[] = [];
    const stateWrites: StateWrites = {
      failed: (file) => said.push(`failed ${file}`),
      succeeded: (file) => said.push(`ok ${file}`),
      failing: () => [],
    };
    const m = createCpuManager({
      ...{ policy: "static", topology: four, reserved: [0], stateFile },
      ...{ logger: nullLogger, stateWrites },
    });
    expect(() => m.start()).not.toThrow();
    const pod = guaranteedPod("g", "1");
    expect(m.admit(pod)).toBeUndefined();
    expect(m.cpusetFor(pod, pod.spec.containers[0] ?? makeContainer())).toBe("1");
    expect(said).toEqual([`failed ${stateFile}`, `failed ${stateFile}`]);
    rmSync(blocker, { recursive: true });
    m.removeStale(() => true);
    expect(said.at(-1)).toBe(`ok ${stateFile}`);
    expect(JSON.parse(readFileSync(stateFile, "utf8")).entries).toEqual({
      "uid-g": { main: "1" },
    });
    const again = createCpuManager({
      ...{ policy: "static", topology: four, reserved: [0], stateFile, logger: nullLogger },
    });
    again.start();
    expect(again.cpusetFor(pod, pod.spec.containers[0] ?? makeContainer())).toBe("1");
  });
});
