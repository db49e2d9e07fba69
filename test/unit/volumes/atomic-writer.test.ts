import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdir, mkdtemp, open, readdir, readFile, readlink, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Payload, writeAtomically } from "../../../src/agent/volumes/index.ts";

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
