import { describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { archOfElfHeader, archOfExecutable, ElfError } from "../../../src/release/elf.ts";

/** A 64-byte ELF header: class, data (1 little, 2 big endian) and e_machine as given. */
function header(machine: number, opts: { cls?: number; data?: number } = {}): Uint8Array {
  const h = new Uint8Array(64);
  h.set([0x7f, 0x45, 0x4c, 0x46, opts.cls ?? 2, opts.data ?? 1, 1]);
  h[16] = 2; // e_type: ET_EXEC
  h[18] = machine & 0xff;
  h[19] = machine >> 8;
  return h;
}

describe("archOfElfHeader()", () => {
  test("reads x86-64 (62) as amd64 and AArch64 (183) as arm64", () => {
    expect(archOfElfHeader(header(62))).toBe("amd64");
    expect(archOfElfHeader(header(183))).toBe("arm64");
  });

  test.each([
    ["another machine (RISC-V, 243)", header(243), "machine 243"],
    ["32-bit ARM (40)", header(40), "machine 40"],
    ["a 32-bit class", header(62, { cls: 1 }), "not a 64-bit"],
    ["a big-endian header", header(183, { data: 2 }), "not a little-endian"],
    ["a shell script", new TextEncoder().encode("#!/bin/sh\necho hello world\n"), "not an ELF"],
    ["a file shorter than the header", header(62).subarray(0, 19), "not an ELF"],
    ["an empty file", new Uint8Array(0), "not an ELF"],
  ])("refuses %s", (_, head, message) => {
    expect(() => archOfElfHeader(head, "x")).toThrow(ElfError);
    expect(() => archOfElfHeader(head, "x")).toThrow(message);
  });
});

describe("archOfExecutable()", () => {
  test("reads the header of a file, and of the running Bun", async () => {
    const dir = mkdtempSync(join(tmpdir(), "elf-"));
    writeFileSync(join(dir, "a"), header(183));
    expect(await archOfExecutable(join(dir, "a"))).toBe("arm64");
    const own = process.arch === "x64" ? "amd64" : "arm64";
    expect(await archOfExecutable(process.execPath)).toBe(own);
  });
});
