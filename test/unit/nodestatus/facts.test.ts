// The node's static facts: the CPU model from lscpu's output, and gathering that never fails.
import { describe, expect, test } from "bun:test";
import { cpus, totalmem } from "node:os";
import { gatherNodeFacts, lscpuModelName } from "../../../src/agent/nodestatus/facts.ts";
import { nullLogger } from "../../../src/util/log.ts";

const input = {
  nodeName: "dev1",
  hostIP: "192.0.2.7",
  version: "0.1.0",
  maxPods: 110,
  configLabels: { site: "kitchen" },
  logger: nullLogger,
  readText: async (path: string) => {
    if (path === "/etc/os-release")
      return 'NAME="Debian"\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n';
    throw new Error(`no ${path}`);
  },
};

describe("node facts", () => {
  test("lscpuModelName() reads the model name as lscpu prints it on x86 and on a Raspberry Pi", () => {
    const x86 =
      "Architecture:  x86_64\nVendor ID:     AuthenticAMD\nModel name:    AMD EPYC\nCPU family: 26\n";
    const pi =
      "Architecture:  aarch64\nVendor ID:     ARM\nModel name:    Cortex-A72\nModel:   3\n";
    expect(lscpuModelName(x86)).toBe("AMD EPYC");
    expect(lscpuModelName(pi)).toBe("Cortex-A72");
    expect(lscpuModelName("Architecture: riscv64\n")).toBe("");
  });

  test("reads this machine's cores and memory, and files that cannot be read stay empty", async () => {
    const facts = await gatherNodeFacts(input);
    expect(facts.cpuCores).toBe(cpus().length);
    expect(facts.memoryBytes).toBe(totalmem());
    expect(facts.osImage).toBe("Debian GNU/Linux 12 (bookworm)");
    expect(facts.machineID).toBe("");
    expect(facts.configLabels).toEqual({ site: "kitchen" });
  });

  test("hardware that cannot be read falls back to node:os", async () => {
    const facts = await gatherNodeFacts({
      ...input,
      hardware: () => Promise.reject(new Error("no hardware here")),
    });
    expect(facts.cpuCores).toBe(cpus().length);
    expect(facts.memoryBytes).toBe(totalmem());
  });
});
