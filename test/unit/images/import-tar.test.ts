import { describe, expect, test } from "bun:test";
import { readTar, TarError } from "../../../src/agent/images/import/tar.ts";
import { writeTar } from "../../lib/image-archives.ts";

const enc = new TextEncoder();
const dec = (b: Uint8Array | undefined) =>
  b === undefined ? undefined : new TextDecoder().decode(b);

/** A raw 512-byte header block with a valid checksum, for entry types writeTar does not make. */
function rawHeader(name: string, type: string, size: number): Uint8Array {
  const h = writeTar([{ name, data: new Uint8Array(size) }]).slice(0, 512);
  h[156] = type.charCodeAt(0);
  h.fill(32, 148, 156);
  const sum = h.reduce((a, b) => a + b, 0);
  h.set(enc.encode(`${sum.toString(8).padStart(6, "0")}\0 `), 148);
  return h;
}

/** One PAX record, "<length> key=value\n", its length counting its own digits. */
function paxRecord(key: string, value: string): string {
  const body = ` ${key}=${value}\n`;
  let n = body.length + 1;
  while (String(n).length + body.length !== n) n = String(n).length + body.length;
  return `${n}${body}`;
}

function pad(data: Uint8Array): Uint8Array {
  return Buffer.concat([data, new Uint8Array((512 - (data.length % 512)) % 512)]);
}

describe("readTar()", () => {
  test("reads regular files by their cleaned names", () => {
    const files = readTar(
      writeTar([
        { name: "./manifest.json", data: enc.encode("[]") },
        { name: "blobs/sha256/ab", data: enc.encode("x".repeat(700)) },
      ]),
    );
    expect([...files.keys()]).toEqual(["manifest.json", "blobs/sha256/ab"]);
    expect(files.get("blobs/sha256/ab")?.length).toBe(700);
  });

  test("resolves a docker save symlink to its target's bytes, relative to the link's folder", () => {
    const files = readTar(
      writeTar([
        { name: "aaa.tar", data: enc.encode("layer") },
        { name: "bbb/layer.tar", link: "../aaa.tar" },
        { name: "ccc/layer.tar", link: "../../outside.tar" },
      ]),
    );
    expect(dec(files.get("bbb/layer.tar"))).toBe("layer");
    expect(files.has("ccc/layer.tar")).toBe(false);
  });

  test("takes a PAX header's path and a GNU long name", () => {
    const long = `${"d/".repeat(80)}file`;
    const pax = enc.encode(paxRecord("path", long));
    const gnu = enc.encode(`${long}-gnu\0`);
    const noEnd = (t: Uint8Array) => t.subarray(0, t.length - 1024);
    const tar = Buffer.concat([
      rawHeader("pax", "x", pax.length),
      pad(pax),
      noEnd(writeTar([{ name: "short", data: enc.encode("1") }])),
      rawHeader("././@LongLink", "L", gnu.length),
      pad(gnu),
      writeTar([{ name: "short2", data: enc.encode("2") }]),
    ]);
    const files = readTar(tar);
    expect(dec(files.get(long))).toBe("1");
    expect(dec(files.get(`${long}-gnu`))).toBe("2");
    expect(files.has("short")).toBe(false);
  });

  test("reads a base-256 size field", () => {
    const tar = writeTar([{ name: "f", data: enc.encode("abc") }]);
    const h = tar.subarray(0, 512);
    h.fill(0, 124, 136);
    h[124] = 0x80;
    h[135] = 3;
    h.fill(32, 148, 156);
    const sum = h.reduce((a, b) => a + b, 0);
    h.set(enc.encode(`${sum.toString(8).padStart(6, "0")}\0 `), 148);
    expect(dec(readTar(tar).get("f"))).toBe("abc");
  });

  const broken: [string, () => Uint8Array, RegExp][] = [
    [
      "an archive cut inside an entry",
      () => writeTar([{ name: "f", data: new Uint8Array(2000) }]).subarray(0, 1100),
      /past the end/,
    ],
    [
      "a size field past the end",
      () => writeTar([{ name: "f", data: new Uint8Array(10), sizeField: "77777777777\0" }]),
      /past the end/,
    ],
    ["a cut header block", () => writeTar([{ name: "f" }]).subarray(0, 300), /truncated/],
    ["an empty input", () => new Uint8Array(), /truncated/],
    ["an absolute name", () => writeTar([{ name: "/etc/passwd" }]), /leaves the archive/],
    ["a name climbing out", () => writeTar([{ name: "a/../../x" }]), /leaves the archive/],
    ["a file named only by dots and slashes", () => writeTar([{ name: "./" }]), /without a name/],
    [
      "a bad checksum",
      () => {
        const t = writeTar([{ name: "f", data: enc.encode("x") }]);
        t[0] = "g".charCodeAt(0);
        return t;
      },
      /checksum/,
    ],
    ["a non-octal size", () => writeTar([{ name: "f", sizeField: "12z\0" }]), /checksum|not octal/],
  ];
  test.each(broken)("refuses %s with a TarError", (_, make, message) => {
    expect(() => readTar(make())).toThrow(TarError);
    expect(() => readTar(make())).toThrow(message);
  });

  test("refuses more entries than the limit", () => {
    const tar = writeTar([{ name: "a" }, { name: "b" }, { name: "c" }]);
    expect(() => readTar(tar, { maxEntries: 2 })).toThrow("more than 2 entries");
  });

  test("refuses a PAX header above the header limit before reading it", () => {
    const big = new Uint8Array(4096).fill(65);
    const tar = Buffer.concat([rawHeader("pax", "x", big.length), big, new Uint8Array(1024)]);
    expect(() => readTar(tar, { maxHeaderBytes: 1024 })).toThrow("header too large");
  });
});
