import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { existsSync, lstatSync } from "node:fs";
import { mkdir, mkdtemp, realpath, rename, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { prepareSubPath } from "../../../src/agent/volumes/subpath.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { FakeMounter } from "../../lib/fake-mounter.ts";

let root: string;
let vol: string;
let mounter: FakeMounter;
beforeEach(async () => {
  root = await realpath(await mkdtemp(join(tmpdir(), "fleetlet-subpath-")));
  vol = join(root, "vol");
  await mkdir(vol);
  mounter = new FakeMounter();
});
afterEach(() => rm(root, { recursive: true, force: true }));

const target = () => join(root, "pod", "volume-subpaths", "w", "c", "0");
const prepare = (subPath: string) =>
  prepareSubPath(
    { volumePath: vol, subPath, target: target(), volumeName: "w", containerName: "c" },
    mounter,
    nullLogger,
  );

describe("prepareSubPath()", () => {
  test("binds a file of the volume onto the pod's own target and returns it", async () => {
    await writeFile(join(vol, "f"), "x");
    expect(await prepare("f")).toBe(target());
    expect(mounter.binds.get(target())).toBe(join(vol, "f"));
    expect(lstatSync(target()).isFile()).toBe(true);
  });

  test("creates a missing folder, and follows a symlink that stays inside the volume", async () => {
    expect(await prepare("a/b")).toBe(target());
    expect(lstatSync(join(vol, "a/b")).isDirectory()).toBe(true);
    await mkdir(join(vol, "real"));
    await symlink("real", join(vol, "link"));
    await prepare("link");
    expect(mounter.binds.get(target())).toBe(join(vol, "real"));
  });

  test("refuses '..' and absolute paths with the kubelet's messages, touching nothing", async () => {
    await expect(prepare("a/../../etc")).rejects.toThrow(
      "unable to provision SubPath `a/../../etc`: must not contain '..'",
    );
    await expect(prepare("/etc")).rejects.toThrow(
      "error SubPath `/etc` must not be an absolute path",
    );
    expect(mounter.calls).toEqual([]);
  });

  test("refuses a symlink out of the volume, and a folder to create through one", async () => {
    await symlink("/etc", join(vol, "escape"));
    await expect(prepare("escape")).rejects.toThrow(
      'failed to prepare subPath for volumeMount "w" of container "c"',
    );
    await expect(prepare("escape/new")).rejects.toThrow(
      'failed to create subPath directory for volumeMount "w" of container "c"',
    );
    expect(existsSync("/etc/new")).toBe(false);
    expect(mounter.calls).toEqual([]);
  });

  test("reuses a bind of the same file, and replaces one whose file changed", async () => {
    await writeFile(join(vol, "f"), "1");
    await prepare("f");
    await prepare("f");
    expect(mounter.calls.filter((c) => c.startsWith("bind"))).toHaveLength(1);
    // Replaced by another file (written while the first one still exists: another inode).
    await writeFile(join(vol, "g"), "2");
    await rename(join(vol, "g"), join(vol, "f"));
    await prepare("f");
    expect(mounter.calls.slice(1)).toEqual([
      `umount ${target()}`,
      `bind ${join(vol, "f")} ${target()}`,
    ]);
  });

  test("undoes a bind that is not the file it checked", async () => {
    await writeFile(join(vol, "f"), "1");
    await writeFile(join(root, "other"), "2");
    mounter.bind = async (_source, t) => {
      mounter.mounts.set(t, "bind");
      mounter.binds.set(t, join(root, "other"));
    };
    await expect(prepare("f")).rejects.toThrow(
      'failed to prepare subPath for volumeMount "w" of container "c"',
    );
    expect(mounter.mounts.has(target())).toBe(false);
  });
});
