import { afterEach, describe, expect, test } from "bun:test";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLogRotation, planRotation } from "../../../src/agent/gc/index.ts";
import { nodeSelector } from "../../../src/agent/kuberuntime/index.ts";
import { rotationStamp } from "../../../src/agent/logs/index.ts";
import { createFakeRuntime } from "../../../src/cri/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";

describe("planRotation()", () => {
  const L = "/logs/c/0.log";
  const cases: [string, string[], number, { remove: string[]; compress: string[] }][] = [
    ["nothing rotated yet", [], 5, { remove: [], compress: [] }],
    [
      "compresses the rotated file left plain by the last rotation",
      [`${L}.20260101-000000.gz`, `${L}.20260101-000100`],
      5,
      { remove: [], compress: [`${L}.20260101-000100`] },
    ],
    [
      "keeps maxFiles - 2 rotated files, removing the oldest",
      [`${L}.20260101-000000.gz`, `${L}.20260101-000100.gz`, `${L}.20260101-000200`],
      3,
      {
        remove: [`${L}.20260101-000000.gz`, `${L}.20260101-000100.gz`],
        compress: [`${L}.20260101-000200`],
      },
    ],
    [
      "keeps no rotated file at maxFiles 2",
      [`${L}.20260101-000200`],
      2,
      { remove: [`${L}.20260101-000200`], compress: [] },
    ],
    [
      "removes temporary files and originals whose compressed copy exists",
      [
        `${L}.20260101-000000`,
        `${L}.20260101-000000.gz`,
        `${L}.20260101-000100`,
        `${L}.20260101-000100.tmp`,
      ],
      5,
      {
        remove: [`${L}.20260101-000000`, `${L}.20260101-000100.tmp`],
        compress: [`${L}.20260101-000100`],
      },
    ],
  ];
  for (const [name, files, maxFiles, expected] of cases) {
    test(name, () => {
      expect(planRotation(files, maxFiles)).toEqual(expected);
    });
  }
});

let dirs: string[] = [];
afterEach(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  dirs = [];
});

/** A fake runtime with one running container whose log is a real file; ReopenContainerLog makes
 * a new empty file at its path, as the runtime does. */
async function setup(maxFiles = 3) {
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-logrot-"));
  dirs.push(dir);
  const clock = new FakeClock(Date.UTC(2026, 0, 1, 12, 0, 0));
  const cri = createFakeRuntime({ now: () => clock.now() });
  cri.images.add("busybox");
  const labels = { ...nodeSelector("node1"), "io.kubernetes.pod.uid": "u1" };
  const sandboxConfig = {
    metadata: { name: "p", namespace: "default", uid: "u1", attempt: 0 },
    labels,
    logDirectory: dir,
  };
  const { podSandboxId } = await cri.runPodSandbox({ config: sandboxConfig });
  const { containerId } = await cri.createContainer({
    podSandboxId,
    sandboxConfig,
    config: {
      metadata: { name: "c", attempt: 0 },
      image: { image: "busybox" },
      labels,
      logPath: "c/0.log",
    },
  });
  await cri.startContainer({ containerId });
  const log = join(dir, "c", "0.log");
  mkdirSync(join(dir, "c"));
  writeFileSync(log, "");
  let reopenFails = false;
  cri.setHook((method) => {
    if (method !== "reopenContainerLog") return;
    if (reopenFails) throw new Error("cannot reopen");
    writeFileSync(log, "");
  });
  const rotation = createLogRotation({
    cri,
    clock,
    logger: nullLogger,
    nodeName: "node1",
    policy: { maxSizeBytes: 100, maxFiles },
    monitorIntervalMs: 10_000,
  });
  const files = () => readdirSync(join(dir, "c")).sort();
  const failReopen = (v: boolean) => {
    reopenFails = v;
  };
  return { clock, cri, rotation, log, files, containerId, failReopen };
}

describe("createLogRotation() with the fake runtime and real files", () => {
  test("leaves a log under the limit alone", async () => {
    const { rotation, log, files } = await setup();
    writeFileSync(log, "x".repeat(99));
    expect(await rotation.rotateLogs()).toBe(0);
    expect(files()).toEqual(["0.log"]);
  });

  test("rotates a log at the limit with the kubelet's names, gzips the older ones, keeps maxFiles", async () => {
    const { clock, rotation, log, files } = await setup(3);
    const stamps: string[] = [];
    for (let i = 0; i < 4; i++) {
      writeFileSync(log, `round ${i} `.repeat(20));
      stamps.push(rotationStamp(clock.now()));
      expect(await rotation.rotateLogs()).toBe(1);
      clock.step(60_000);
    }
    // The current file, the newest rotated plain, one older gzipped: 3 files.
    expect(files()).toEqual(["0.log", `0.log.${stamps[2]}.gz`, `0.log.${stamps[3]}`]);
    expect(readFileSync(log, "utf8")).toBe("");
    const gz = readFileSync(join(log, "..", `0.log.${stamps[2]}.gz`));
    expect(new TextDecoder().decode(Bun.gunzipSync(gz))).toBe("round 2 ".repeat(20));
    expect(readFileSync(`${log}.${stamps[3]}`, "utf8")).toBe("round 3 ".repeat(20));
  });

  test("a second rotation within the same second waits for the next check", async () => {
    const { clock, rotation, log, files } = await setup();
    writeFileSync(log, "a".repeat(200));
    expect(await rotation.rotateLogs()).toBe(1);
    writeFileSync(log, "b".repeat(200));
    clock.step(999);
    expect(await rotation.rotateLogs()).toBe(0);
    // Nothing moved: the rotated file stays plain, the current one keeps its lines.
    expect(files()).toEqual(["0.log", `0.log.${rotationStamp(clock.now())}`]);
    expect(readFileSync(log, "utf8")).toBe("b".repeat(200));
  });

  test("renames the log back when the runtime cannot reopen it, and rotates at the next check", async () => {
    const { clock, rotation, log, files, failReopen } = await setup();
    writeFileSync(log, "a".repeat(200));
    failReopen(true);
    expect(await rotation.rotateLogs()).toBe(0);
    expect(files()).toEqual(["0.log"]);
    expect(readFileSync(log, "utf8")).toBe("a".repeat(200));
    failReopen(false);
    clock.step(10_000);
    expect(await rotation.rotateLogs()).toBe(1);
  });

  test("asks the runtime to reopen a log that went missing", async () => {
    const { cri, rotation, log } = await setup();
    rmSync(log);
    expect(await rotation.rotateLogs()).toBe(0);
    expect(existsSync(log)).toBe(true);
    expect(cri.callsOf("reopenContainerLog")).toHaveLength(1);
  });

  test("reads a container's log path once, not at every check", async () => {
    const { cri, rotation } = await setup();
    await rotation.rotateLogs();
    await rotation.rotateLogs();
    expect(cri.callsOf("containerStatus")).toHaveLength(1);
  });

  test("checks only running containers", async () => {
    const { cri, rotation, containerId } = await setup();
    cri.exitContainer(containerId, 0);
    await rotation.rotateLogs();
    expect(cri.callsOf("containerStatus")).toHaveLength(0);
  });
});
