// The node's static facts: the CPU model from lscpu's output where node:os names none, the
// identity files' fallbacks, and gathering that never fails.
import { describe, expect, test } from "bun:test";
import { cpus, totalmem } from "node:os";
import { cpuModel, gatherNodeFacts, lscpuModelName } from "../../../src/agent/nodestatus/facts.ts";
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

  test("cpuModel() asks lscpu only when node:os names no model or says unknown", async () => {
    const pi = "Architecture:  aarch64\nModel name:    Cortex-A72\n";
    const cases: { reported: string | undefined; want: string; lscpuRuns: boolean }[] = [
      { reported: "Intel(R) Xeon(R) CPU", want: "Intel(R) Xeon(R) CPU", lscpuRuns: false },
      { reported: " AMD EPYC 7B13 ", want: "AMD EPYC 7B13", lscpuRuns: false },
      { reported: "unknown", want: "Cortex-A72", lscpuRuns: true },
      { reported: "Unknown", want: "Cortex-A72", lscpuRuns: true },
      { reported: "", want: "Cortex-A72", lscpuRuns: true },
      { reported: "  ", want: "Cortex-A72", lscpuRuns: true },
      { reported: undefined, want: "Cortex-A72", lscpuRuns: true },
    ];
    for (const c of cases) {
      let runs = 0;
      const model = await cpuModel(c.reported, async () => {
        runs++;
        return pi;
      });
      expect({ reported: c.reported, model, lscpuRuns: runs > 0 }).toEqual({
        reported: c.reported,
        model: c.want,
        lscpuRuns: c.lscpuRuns,
      });
    }
    expect(await cpuModel("unknown", async () => "")).toBe("");
  });

  /** gatherNodeFacts over `files` (path → text); any other path cannot be read. */
  const factsFrom = (files: Record<string, string>) =>
    gatherNodeFacts({
      ...input,
      readText: async (path: string) => {
        const text = files[path];
        if (text === undefined) throw new Error(`ENOENT: ${path}`);
        return text;
      },
    });

  test("the machine id is /etc/machine-id, else dbus's copy when that is missing or empty", async () => {
    const dbus = "/var/lib/dbus/machine-id";
    const cases: { files: Record<string, string>; want: string }[] = [
      { files: { "/etc/machine-id": "aaaa\n", [dbus]: "bbbb\n" }, want: "aaaa" },
      { files: { [dbus]: "bbbb\n" }, want: "bbbb" },
      { files: { "/etc/machine-id": "\n", [dbus]: "bbbb\n" }, want: "bbbb" },
      { files: { "/etc/machine-id": "" }, want: "" },
      { files: {}, want: "" },
    ];
    for (const c of cases) {
      expect({ files: c.files, id: (await factsFrom(c.files)).machineID }).toEqual({
        files: c.files,
        id: c.want,
      });
    }
  });

  test("the system UUID is DMI's, else the device tree's NUL-terminated serial number", async () => {
    const dmi = "/sys/class/dmi/id/product_uuid";
    const proc = "/proc/device-tree/serial-number";
    const sys = "/sys/firmware/devicetree/base/serial-number";
    const cases: { files: Record<string, string>; want: string }[] = [
      { files: { [dmi]: "4c4c4544-0031\n", [proc]: "10000000abcd\0" }, want: "4c4c4544-0031" },
      { files: { [proc]: "10000000abcd\0" }, want: "10000000abcd" },
      { files: { [dmi]: "\n", [proc]: "10000000abcd\0" }, want: "10000000abcd" },
      { files: { [proc]: "\0", [sys]: "20000000ef01\0" }, want: "20000000ef01" },
      { files: { [sys]: "20000000ef01\0" }, want: "20000000ef01" },
      { files: {}, want: "" },
    ];
    for (const c of cases) {
      expect({ files: c.files, uuid: (await factsFrom(c.files)).systemUUID }).toEqual({
        files: c.files,
        uuid: c.want,
      });
    }
  });
});
