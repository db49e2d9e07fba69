import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import {
  chmod,
  lstat,
  mkdir,
  mkdtemp,
  open,
  readdir,
  readFile,
  readlink,
  rm,
  stat,
} from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Payload, writeAtomically } from "../../../src/agent/volumes/index.ts";
import { applyFsGroup, fsGroupMode } from "../../../src/agent/volumes/ownership.ts";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "fleetlet-atomic-"));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

const T1 = new Date(Date.UTC(2026, 4, 1, 10, 0, 0));
const T2 = new Date(Date.UTC(2026, 4, 1, 10, 0, 7));

function payload(files: Record<string, string | [string, number]>): Payload {
  return new Map(
    Object.entries(files).map(([path, f]) => {
      const [data, mode] = typeof f === "string" ? [f, 0o644] : f;
      return [path, { data: Buffer.from(data), mode }];
    }),
  );
}

const entries = async () => (await readdir(dir)).sort();

describe("writeAtomically()", () => {
  test("writes a timestamped version, points ..data at it and links each top-level name into it", async () => {
    expect(await writeAtomically(dir, payload({ a: "1", "sub/b": ["2", 0o400] }), T1)).toBe(true);
    const version = await readlink(join(dir, "..data"));
    expect(version).toMatch(/^\.\.2026_05_01_10_00_00\./);
    expect(await entries()).toEqual(["..data", version, "a", "sub"].sort());
    expect(await readlink(join(dir, "a"))).toBe("..data/a");
    expect(await readlink(join(dir, "sub"))).toBe("..data/sub");
    expect(await readFile(join(dir, "sub/b"), "utf8")).toBe("2");
    expect((await stat(join(dir, "sub/b"))).mode & 0o777).toBe(0o400);
    expect((await stat(join(dir, version))).mode & 0o777).toBe(0o755);
  });

  test("writes nothing when the content and modes are the same", async () => {
    await writeAtomically(dir, payload({ a: "1" }), T1);
    const version = await readlink(join(dir, "..data"));
    expect(await writeAtomically(dir, payload({ a: "1" }), T2)).toBe(false);
    expect(await readlink(join(dir, "..data"))).toBe(version);
    expect(await writeAtomically(dir, payload({ a: ["1", 0o600] }), T2)).toBe(true);
  });

  test("replaces the version whole: new names appear, removed ones go, the old folder is removed, an open file keeps its content", async () => {
    await writeAtomically(dir, payload({ a: "old", gone: "x" }), T1);
    const old = await readlink(join(dir, "..data"));
    const reader = await open(join(dir, "a"));
    await writeAtomically(dir, payload({ a: "new", added: "y" }), T2);
    const version = await readlink(join(dir, "..data"));
    expect(version).toMatch(/^\.\.2026_05_01_10_00_07\./);
    expect(await entries()).toEqual(["..data", version, "a", "added"].sort());
    expect(await readFile(join(dir, "a"), "utf8")).toBe("new");
    expect((await reader.readFile()).toString()).toBe("old");
    await reader.close();
    expect(await readdir(dir)).not.toContain(old);
  });

  test("removes versions a cut-short write left behind", async () => {
    await mkdir(join(dir, "..2020_01_01_00_00_00.left"));
    await writeAtomically(dir, payload({ a: "1" }), T1);
    expect((await entries()).filter((e) => e.startsWith("..2020"))).toEqual([]);
  });

  test("refuses paths that would leave the folder or take the writer's names", async () => {
    await expect(writeAtomically(dir, payload({ "../x": "1" }), T1)).rejects.toThrow(
      "invalid path: must not contain '..': ../x",
    );
    await expect(writeAtomically(dir, payload({ "..data/x": "1" }), T1)).rejects.toThrow(
      "invalid path: must not start with '..': ..data/x",
    );
    await expect(writeAtomically(dir, payload({ "/etc/x": "1" }), T1)).rejects.toThrow(
      "invalid path: must be relative path: /etc/x",
    );
    expect(await entries()).toEqual([]);
  });
});

// Giving files a group the test's user is not in needs root (as the agent runs).
const root = process.getuid?.() === 0;
describe.skipIf(!root)("writeAtomically() with the pod's fsGroup (needs root: chown)", () => {
  const G = 4321;
  test("every file, folder and link gets the group; files group read, folders group search and setgid", async () => {
    await writeAtomically(dir, payload({ a: ["1", 0o400], "sub/b": ["2", 0o600] }), T1, G);
    const version = await readlink(join(dir, "..data"));
    for (const p of [
      "a",
      "sub",
      "..data",
      version,
      `${version}/a`,
      `${version}/sub`,
      `${version}/sub/b`,
    ])
      expect([p, (await lstat(join(dir, p))).gid]).toEqual([p, G]);
    const mode = async (p: string) => (await stat(join(dir, p))).mode & 0o7777;
    expect(await mode("a")).toBe(0o440);
    expect(await mode("sub/b")).toBe(0o640);
    expect(await mode(version)).toBe(0o2755);
    expect(await mode(`${version}/sub`)).toBe(0o2755);
    // The same payload and group again: nothing to write (the group's bits are expected).
    expect(
      await writeAtomically(dir, payload({ a: ["1", 0o400], "sub/b": ["2", 0o600] }), T2, G),
    ).toBe(false);
    // Another group: written again.
    expect(
      await writeAtomically(dir, payload({ a: ["1", 0o400], "sub/b": ["2", 0o600] }), T2, G + 1),
    ).toBe(true);
    expect((await stat(join(dir, "a"))).gid).toBe(G + 1);
  });

  test("applyFsGroup(): a read-write folder gets group rwx and setgid, the owner stays", async () => {
    await mkdir(join(dir, "e"));
    await chmod(join(dir, "e"), 0o777); // an emptyDir's folder
    const before = await stat(join(dir, "e"));
    await applyFsGroup(join(dir, "e"), G, false);
    const after = await stat(join(dir, "e"));
    expect(after.mode & 0o7777).toBe(0o2777);
    expect([after.uid, after.gid]).toEqual([before.uid, G]);
  });
});

test("fsGroupMode(): the kubelet's masks", () => {
  expect(fsGroupMode(0o400, false, true)).toBe(0o440);
  expect(fsGroupMode(0o600, false, false)).toBe(0o660);
  expect(fsGroupMode(0o750, true, true)).toBe(0o2750);
  expect(fsGroupMode(0o700, true, false)).toBe(0o2770);
});
