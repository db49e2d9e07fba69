import { describe, expect, test } from "bun:test";
import {
  ManifestError,
  parseManifest,
  type ReleaseFields,
  serializeManifest,
  signedBytes,
  versionProblem,
} from "../../../src/release/manifest.ts";

const fields: ReleaseFields = {
  version: "0.2.0",
  arch: "amd64",
  size: 104857600,
  sha256: "3f".repeat(32),
};
const signature = new Uint8Array(64).map((_, i) => i);
const text = serializeManifest({ ...fields, signature });

function lineOf(fn: () => unknown): number {
  try {
    fn();
  } catch (err) {
    if (err instanceof ManifestError) return err.line;
    throw err;
  }
  throw new Error("no error");
}

describe("release manifests", () => {
  test("serializeManifest() writes the six lines of the documented format", () => {
    expect(text).toBe(
      `fleetlet-release: 1\nversion: 0.2.0\narch: amd64\nsize: 104857600\nsha256: ${"3f".repeat(32)}\nsignature: ${Buffer.from(signature).toString("base64")}\n`,
    );
  });

  test("signedBytes() is every byte before the signature line", () => {
    const cut = text.indexOf("signature: ");
    expect(new TextDecoder().decode(signedBytes(fields))).toBe(text.slice(0, cut));
  });

  test("parseManifest() reads back what serializeManifest() wrote, from text and bytes, with or without the final LF", () => {
    for (const input of [text, text.slice(0, -1), new TextEncoder().encode(text)]) {
      const m = parseManifest(input);
      expect({ ...m, signature: undefined }).toEqual({ ...fields, signature: undefined });
      expect(Array.from(m.signature)).toEqual(Array.from(signature));
    }
  });

  const lines = text.split("\n");
  const withLine = (i: number, line: string) =>
    lines.map((l, j) => (j === i ? line : l)).join("\n");
  test.each([
    ["format 2", withLine(0, "fleetlet-release: 2"), 1],
    ["a missing space", withLine(1, "version:0.2.0"), 2],
    ["lines out of order", [lines[0], lines[2], lines[1], ...lines.slice(3)].join("\n"), 2],
    ["a version with a slash", withLine(1, "version: ../0.2.0"), 2],
    ["a version of 65 characters", withLine(1, `version: ${"1".repeat(65)}`), 2],
    ["an unknown arch", withLine(2, "arch: x86_64"), 3],
    ["a size with a leading zero", withLine(3, "size: 0100"), 4],
    ["a size of 0", withLine(3, "size: 0"), 4],
    ["a size past 2^53", withLine(3, "size: 9999999999999999"), 4],
    ["an upper-case sha256", withLine(4, `sha256: ${"3F".repeat(32)}`), 5],
    ["a short sha256", withLine(4, `sha256: ${"3f".repeat(31)}`), 5],
    [
      "a signature of 63 bytes",
      withLine(5, `signature: ${Buffer.alloc(63).toString("base64")}`),
      6,
    ],
    ["a signature not in canonical base64", withLine(5, `signature: ${"A".repeat(85)}AB==`), 6],
    ["a CR line end", text.replace("arch: amd64\n", "arch: amd64\r\n"), 3],
    ["a missing signature line", lines.slice(0, 5).join("\n"), 6],
    ["a line after the signature", `${text}extra: 1\n`, 7],
    ["a second LF at the end", `${text}\n`, 7],
    ["an empty text", "", 1],
  ])("parseManifest() refuses %s, naming the line", (_, input, line) => {
    expect(lineOf(() => parseManifest(input))).toBe(line);
  });

  test("parseManifest() refuses bytes that are not UTF-8 with a ManifestError", () => {
    expect(() => parseManifest(new Uint8Array([0xff, 0xfe, 0x0a]))).toThrow(ManifestError);
  });

  test("a ManifestError's message names the line and the value", () => {
    expect(() => parseManifest(withLine(2, "arch: riscv64"))).toThrow(
      'malformed release manifest, line 3: unknown arch "riscv64": want amd64 or arm64',
    );
  });

  test("versionProblem() takes semver-like versions and refuses path-like or long ones", () => {
    for (const ok of ["0.2.0", "1.0.0-rc.1+build.5", "v2", "2026.12.06"]) {
      expect(versionProblem(ok)).toBeUndefined();
    }
    for (const bad of ["", ".", "..", "-1", "1/2", "1 2", "é", "1".repeat(65)]) {
      expect(versionProblem(bad)).toContain("invalid version");
    }
  });

  test("signedBytes() and serializeManifest() refuse fields the parser would refuse", () => {
    expect(() => signedBytes({ ...fields, size: 1.5 })).toThrow(ManifestError);
    expect(() => signedBytes({ ...fields, sha256: "x" })).toThrow(ManifestError);
    expect(() => serializeManifest({ ...fields, signature: new Uint8Array(10) })).toThrow(
      ManifestError,
    );
  });
});
