import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HostFiles } from "../../../src/util/host-file.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function file(text: string): string {
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-host-file-"));
  dirs.push(dir);
  const path = join(dir, "resolv.conf");
  writeFileSync(path, text);
  return path;
}

describe("HostFiles.read()", () => {
  test("reads a file, and reads it again once it changed", () => {
    const files = new HostFiles();
    const path = file("nameserver 10.0.0.1\n");
    expect(files.read(path)).toBe("nameserver 10.0.0.1\n");
    writeFileSync(path, "nameserver 10.0.0.2\n");
    // Same size: the new modification time tells the change.
    utimesSync(path, new Date(), new Date(Date.now() + 5000));
    expect(files.read(path)).toBe("nameserver 10.0.0.2\n");
  });

  test("keeps what it read while the file is unchanged", () => {
    const files = new HostFiles();
    const path = file("a\n");
    const first = files.read(path);
    expect(files.read(path)).toBe(first as string);
  });

  test("gives undefined for a missing file and throws for a folder", () => {
    const files = new HostFiles();
    const path = file("");
    expect(files.read(`${path}.missing`)).toBeUndefined();
    expect(() => files.read(join(path, ".."))).toThrow();
  });
});
