import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { podUidOfLogDir, removeOrphanDirs } from "../../../src/agent/syncloop/orphan-dirs.ts";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "fleetlet-orphans-"));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

describe("pod folder housekeeping", () => {
  test("podUidOfLogDir() reads <namespace>_<name>_<uid> and nothing else", () => {
    expect(podUidOfLogDir("default_web-node1_0f1e")).toBe("0f1e");
    expect(podUidOfLogDir("web")).toBeUndefined();
    expect(podUidOfLogDir("a_b_c_d")).toBeUndefined();
    expect(podUidOfLogDir("a__c")).toBeUndefined();
  });

  test("removeOrphanDirs() removes the log folders of pods not kept, rotated files and all", async () => {
    for (const name of ["default_a_u1", "default_b_u2", "not-a-pod"]) {
      await mkdir(join(dir, name, "c"), { recursive: true });
      await writeFile(join(dir, name, "c", "0.log"), "x");
      await writeFile(join(dir, name, "c", "0.log.20260101-000000.gz"), "x");
    }
    const removed = await removeOrphanDirs(dir, podUidOfLogDir, (uid) => uid === "u1");
    expect(removed).toEqual(["default_b_u2"]);
    expect((await readdir(dir)).sort()).toEqual(["default_a_u1", "not-a-pod"]);
  });

  test("removeOrphanDirs() has nothing to do when the folder does not exist", async () => {
    expect(
      await removeOrphanDirs(
        join(dir, "none"),
        (n) => n,
        () => false,
      ),
    ).toEqual([]);
  });
});
