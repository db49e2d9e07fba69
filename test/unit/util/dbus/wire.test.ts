// The D-Bus wire format: known bytes for known values, both byte orders on read, and the
// decoder's refusals of what breaks the rules.
import { describe, expect, test } from "bun:test";
import { marshal } from "../../../../src/util/dbus/marshal.ts";
import { decodeMessage, encodeMessage, messageLength } from "../../../../src/util/dbus/message.ts";
import {
  DBusDecodeError,
  DBusEncodeError,
  parseSignature,
  Variant,
} from "../../../../src/util/dbus/types.ts";
import { unmarshal } from "../../../../src/util/dbus/unmarshal.ts";

const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");
const bytes = (h: string) => new Uint8Array(Buffer.from(h.replace(/\s/g, ""), "hex"));

describe("marshal() writes the specification's layout (no root)", () => {
  const cases: [string, unknown[], string][] = [
    ["y", [7], "07"],
    ["b", [true], "01000000"],
    ["yq", [1, 0x0203], "01 00 0302"],
    ["yu", [1, 5], "01 000000 05000000"],
    ["yt", [1, 2n ** 64n - 1n], "01 00000000000000 ffffffffffffffff"],
    ["yx", [1, -2n], "01 00000000000000 feffffffffffffff"],
    ["s", ["ab"], "02000000 616200"],
    ["o", ["/a"], "02000000 2f6100"],
    ["g", ["a(sv)"], "05 6128737629 00"],
    ["ay", [[1, 2]], "02000000 0102"],
    ["at", [[]], "00000000 00000000"],
    ["a(yy)", [[[1, 2]]], "02000000 00000000 0102"],
    ["a{sy}", [[["k", 9]]], "07000000 00000000 01000000 6b00 09"],
    ["v", [new Variant("u", 3)], "01 7500 00 03000000"],
    ["d", [1.5], "000000000000f83f"],
  ];
  test.each(cases)("signature %p with %p", (sig, values, want) => {
    const got = marshal(sig, values as never);
    expect(hex(got)).toBe(want.replace(/\s/g, ""));
    expect(unmarshal(sig, got, true)).toEqual(values as never);
  });
});

describe("unmarshal() reads big-endian bytes too (no root)", () => {
  test("u, t and a string", () => {
    const got = unmarshal(
      "uts",
      bytes("00000005 00000000 0000000000000102 00000002 616200"),
      false,
    );
    expect(got).toEqual([5, 0x102n, "ab"]);
  });
});

describe("signatures are checked (no root)", () => {
  const bad = [
    "(",
    ")",
    "()",
    "a",
    "{sy}",
    "a{vy}",
    "a{sya}",
    "a{syy}",
    "h",
    "z",
    "(a)",
    `${"a".repeat(33)}y`,
  ];
  test.each(bad)("%p is refused", (sig) => {
    expect(() => parseSignature(sig)).toThrow(DBusEncodeError);
    expect(() => unmarshal(sig, new Uint8Array(0), true)).toThrow(DBusDecodeError);
  });
  test("32 nested arrays are allowed", () => {
    expect(parseSignature(`${"a".repeat(32)}y`)).toHaveLength(1);
  });
});

describe("values that do not fit their type are refused when written (no root)", () => {
  const cases: [string, unknown][] = [
    ["y", 256],
    ["y", -1],
    ["u", 1.5],
    ["t", -1n],
    ["x", 2n ** 63n],
    ["t", 5],
    ["b", 1],
    ["s", "a\0b"],
    ["o", "/a/"],
    ["o", "a"],
    ["g", "(("],
    ["(ss)", ["a"]],
    ["v", "s"],
    ["v", new Variant("ss", ["a", "b"])],
  ];
  test.each(cases)("%p with %p", (sig, v) => {
    expect(() => marshal(sig, [v] as never)).toThrow(DBusEncodeError);
  });
});

describe("the decoder refuses bytes that break the rules (no root)", () => {
  const cases: [string, string, string][] = [
    ["b", "02000000", "boolean"],
    ["yu", "01 010000 05000000", "padding"],
    ["s", "ffffffff 00", "needs"],
    ["s", "01000000 6101", "NUL"],
    ["s", "01000000 ff00", "UTF-8"],
    ["s", "02000000 610000", "NUL"],
    ["o", "02000000 2f2f00", "object path"],
    ["ay", "05000000 0102", "only"],
    ["au", "06000000 01000000 02000000", "past"],
    ["g", "02 282800", "signature"],
    ["v", "02 757500 00 0000000000000000", "variant"],
    ["ay", "00000000 01", "left after"],
  ];
  test.each(cases)("%p from %p (%s)", (sig, h, what) => {
    expect(() => unmarshal(sig, bytes(h), true)).toThrow(what);
    expect(() => unmarshal(sig, bytes(h), true)).toThrow(DBusDecodeError);
  });

  test("variants nested more than 64 deep", () => {
    let body = "01 7900 07"; // v holding y
    for (let i = 0; i < 70; i++) body = `01 7600 ${body}`;
    expect(() => unmarshal("v", bytes(body), true)).toThrow("deep");
  });
});

describe("messages (no root)", () => {
  test("a method call round-trips with its header fields", () => {
    const m = {
      kind: "call" as const,
      flags: 0,
      serial: 0,
      path: "/org/freedesktop/DBus",
      interface: "org.freedesktop.DBus",
      member: "GetNameOwner",
      destination: "org.freedesktop.DBus",
      signature: "s",
      body: ["x.y"],
    };
    const b = encodeMessage(m, 7);
    expect(messageLength(b, 1 << 20)).toBe(b.length);
    expect(decodeMessage(b)).toEqual({ ...m, serial: 7 });
  });

  test("a message longer than the limit is refused from its first 16 bytes", () => {
    const start = bytes("6c 01 00 01 00000010 01000000 00000000");
    expect(() => messageLength(start, 1024)).toThrow("longer than the limit 1024");
  });

  test("a call without a member is refused", () => {
    const b = encodeMessage(
      {
        kind: "signal",
        flags: 0,
        serial: 0,
        path: "/a",
        interface: "a.b",
        member: "M",
        signature: "",
        body: [],
      },
      3,
    );
    b[1] = 1; // now a method call: it has a path and a member, so it is still valid
    expect(decodeMessage(b)?.kind).toBe("call");
    b[1] = 3; // an error needs an error name and a reply serial
    expect(() => decodeMessage(b)).toThrow("without its errorName");
  });

  test("a message of an unknown type is ignored", () => {
    const b = encodeMessage(
      {
        kind: "signal",
        flags: 0,
        serial: 0,
        path: "/a",
        interface: "a.b",
        member: "M",
        signature: "",
        body: [],
      },
      3,
    );
    b[1] = 9;
    expect(decodeMessage(b)).toBeNull();
  });
});

describe("big-endian messages (no root)", () => {
  test("a big-endian signal reads as its little-endian twin", () => {
    const m = {
      kind: "signal" as const,
      flags: 0,
      serial: 0,
      path: "/org/freedesktop/systemd1",
      interface: "org.freedesktop.systemd1.Manager",
      member: "JobRemoved",
      signature: "uoss",
      body: [7, "/org/freedesktop/systemd1/job/7", "kubepods.slice", "done"],
    };
    const big = encodeMessage(m, 9, false);
    expect(big[0]).toBe(0x42);
    expect(hex(big)).not.toBe(hex(encodeMessage(m, 9)));
    expect(decodeMessage(big)).toEqual({ ...m, serial: 9 });
  });
});
