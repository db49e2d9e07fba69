import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  allocatePod,
  type CpuTopology,
  createCpuManager,
  decodeCheckpoint,
  encodeCheckpoint,
  formatCpuSet,
  initialState,
  parseCpuSet,
  releasePod,
  reservedCpus,
  takeByTopology,
  validateState,
} from "../../../src/agent/cm/index.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";

/** 2 sockets × 2 cores × 2 threads: core siblings are (0,4) (1,5) on socket 0, (2,6) (3,7) on 1. */
const topo: CpuTopology = {
  cpus: [0, 1, 2, 3, 4, 5, 6, 7].map((id) => ({ id, core: id % 4, socket: id % 4 < 2 ? 0 : 1 })),
};

const guaranteedPod = (name: string, cpu: string) =>
  makePod({
    name,
    containers: [makeContainer({ name: "main", resources: { limits: { cpu, memory: "64Mi" } } })],
  });

describe("cpu sets", () => {
  test("parse and format the kernel's list format", () => {
    expect(parseCpuSet("0-2,5\n")).toEqual([0, 1, 2, 5]);
    expect(parseCpuSet("")).toEqual([]);
    expect(formatCpuSet([5, 0, 2, 1])).toBe("0-2,5");
    expect(() => parseCpuSet("a-b")).toThrow('invalid cpuset "a-b"');
  });
});

describe("takeByTopology()", () => {
  const all = topo.cpus.map((c) => c.id);
  test("takes a whole socket when the request is a socket", () => {
    expect(takeByTopology(topo, all, 4)).toEqual([0, 1, 4, 5]);
  });
  test("takes whole cores (both threads) before single threads", () => {
    expect(takeByTopology(topo, all, 2)).toEqual([0, 4]);
    expect(takeByTopology(topo, [1, 2, 5, 6, 7], 2)).toEqual([1, 5]);
  });
  test("takes single CPUs in id order when no whole core is free", () => {
    expect(takeByTopology(topo, [1, 2, 7], 1)).toEqual([1]);
    expect(takeByTopology(topo, [1, 2], 3)).toBe(undefined);
  });
  test("reservedCpus() uses the explicit list, else the reserved millicores rounded up", () => {
    expect(reservedCpus(topo, [3], 0)).toEqual([3]);
    expect(reservedCpus(topo, undefined, 1500)).toEqual([0, 4]);
    expect(reservedCpus(topo, undefined, 0)).toEqual([]);
  });
});

describe("static policy", () => {
  const reserved = [0];
  const start = initialState("static", topo);

  test("gives a Guaranteed integer-cpu container exclusive CPUs outside the reserved ones", () => {
    const r = allocatePod(start, topo, reserved, guaranteedPod("g", "2"));
    if ("error" in r) throw new Error(r.error);
    expect(r.state.entries["uid-default-g"]).toEqual({ main: [1, 5] });
    expect(r.state.defaultCpuSet).toEqual([0, 2, 3, 4, 6, 7]);
    expect(validateState(r.state, topo, reserved)).toBe(undefined);
    expect(releasePod(r.state, "uid-default-g").defaultCpuSet).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
  });

  test("leaves fractional and Burstable pods on the shared pool", () => {
    expect(allocatePod(start, topo, reserved, guaranteedPod("f", "1500m"))).toEqual({
      state: start,
    });
    const burstable = makePod({
      containers: [makeContainer({ resources: { requests: { cpu: "1" } } })],
    });
    expect(allocatePod(start, topo, reserved, burstable)).toEqual({ state: start });
  });

  test("refuses a request larger than the free CPUs, saying how many there are", () => {
    const r = allocatePod(start, topo, reserved, guaranteedPod("big", "8"));
    expect(r).toEqual({
      error:
        'not enough cpus available to satisfy request of container "main": requested=8, available=7',
    });
  });

  const withInit = (init: string, app: string, sidecar = false) =>
    makePod({
      name: "i",
      initContainers: [
        makeContainer({
          name: "setup",
          ...(sidecar && { restartPolicy: "Always" as const }),
          resources: { limits: { cpu: init, memory: "64Mi" } },
        }),
      ],
      containers: [
        makeContainer({ name: "main", resources: { limits: { cpu: app, memory: "64Mi" } } }),
      ],
    });

  test("gives an init container exclusive CPUs, which the app container after it may take again", () => {
    const r = allocatePod(start, topo, reserved, withInit("2", "2"));
    if ("error" in r) throw new Error(r.error);
    expect(r.state.entries["uid-default-i"]).toEqual({ setup: [1, 5], main: [1, 5] });
    expect(r.state.defaultCpuSet).toEqual([0, 2, 3, 4, 6, 7]);
    expect(validateState(r.state, topo, reserved)).toBe(undefined);
    expect(releasePod(r.state, "uid-default-i").defaultCpuSet).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
  });

  test("an init container's CPUs count as free for the app container, also when it needs more", () => {
    // 7 CPUs outside the reserved one: the init container's 4 and the 3 others make the 7.
    const r = allocatePod(start, topo, reserved, withInit("4", "7"));
    if ("error" in r) throw new Error(r.error);
    expect(r.state.entries["uid-default-i"]).toEqual({
      setup: [2, 3, 6, 7],
      main: [1, 2, 3, 4, 5, 6, 7],
    });
    expect(r.state.defaultCpuSet).toEqual([0]);
    expect(validateState(r.state, topo, reserved)).toBe(undefined);
  });

  test("a sidecar's CPUs are its own: the app container beside it gets others", () => {
    const r = allocatePod(start, topo, reserved, withInit("2", "2", true));
    if ("error" in r) throw new Error(r.error);
    expect(r.state.entries["uid-default-i"]).toEqual({ setup: [1, 5], main: [2, 6] });
    const tooMany = allocatePod(start, topo, reserved, withInit("4", "4", true));
    expect(tooMany).toEqual({
      error:
        'not enough cpus available to satisfy request of container "main": requested=4, available=3',
    });
  });

  test("validateState() finds CPUs assigned twice and a state of another machine", () => {
    const twice = { ...start, entries: { p: { c: [0] } } };
    expect(validateState(twice, topo, reserved)).toContain("also assigned elsewhere");
    const twoPods = {
      ...start,
      defaultCpuSet: [0, 2, 3, 4, 6, 7],
      entries: { p: { a: [1] }, q: { b: [1, 5] } },
    };
    expect(validateState(twoPods, topo, reserved)).toContain(
      "of container b of pod q are also assigned elsewhere",
    );
    const other = { ...start, defaultCpuSet: [0, 1] };
    expect(validateState(other, topo, reserved)).toContain("are not the online CPUs");
  });
});

describe("CPU manager checkpoint", () => {
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-cpu-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const two: CpuTopology = { cpus: [0, 1].map((id) => ({ id, core: id, socket: 0 })) };

  test("encodes and decodes the state with its checksum", () => {
    const state = { policyName: "static" as const, defaultCpuSet: [0], entries: { u: { c: [1] } } };
    expect(decodeCheckpoint("f", encodeCheckpoint(state))).toEqual(state);
  });

  test("refuses a corrupt checkpoint, naming the file and what is wrong", () => {
    const text = encodeCheckpoint(initialState("static", two)).replace('"0-1"', '"0"');
    expect(() => decodeCheckpoint("/x/cpu_manager_state", text)).toThrow(
      "CPU manager checkpoint /x/cpu_manager_state is corrupt (checksum mismatch)",
    );
    expect(() => decodeCheckpoint("f", "{not json")).toThrow("is corrupt (not JSON)");
  });

  test("a restarted manager keeps the assignments; another policy is refused", () => {
    const stateFile = join(dir, "state");
    const opts = {
      policy: "static" as const,
      topology: two,
      reserved: [0],
      stateFile,
      logger: nullLogger,
    };
    const first = createCpuManager(opts);
    first.start();
    const p = guaranteedPod("g", "1");
    expect(first.admit(p)).toBe(undefined);
    const again = createCpuManager(opts);
    again.start();
    expect(again.cpusetFor(p, p.spec.containers[0] ?? makeContainer())).toBe("1");
    expect(JSON.parse(readFileSync(stateFile, "utf8")).entries).toEqual({
      "uid-default-g": { main: "1" },
    });
    expect(() => createCpuManager({ ...opts, policy: "none" }).start()).toThrow(
      'the configured CPU manager policy "none" differs from "static"',
    );
    writeFileSync(stateFile, "garbage");
    expect(() => createCpuManager(opts).start()).toThrow("is corrupt (not JSON)");
  });

  test("the static policy needs reserved CPUs", () => {
    const m = createCpuManager({
      policy: "static",
      topology: two,
      reserved: [],
      stateFile: join(dir, "s2"),
      logger: nullLogger,
    });
    expect(() => m.start()).toThrow("needs reserved CPUs");
  });
});
