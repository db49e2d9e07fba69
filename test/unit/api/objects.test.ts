import { describe, expect, test } from "bun:test";
import {
  decodeBase64Strict,
  formatFieldError,
  validateConfigMap,
  validateImmutableUpdate,
  validateSecret,
} from "../../../src/api/index.ts";

const b64 = (s: string) => Buffer.from(s).toString("base64");
const cm = (extra: Record<string, unknown>) => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name: "cfg" },
  ...extra,
});
const secret = (extra: Record<string, unknown>) => ({
  apiVersion: "v1",
  kind: "Secret",
  metadata: { name: "s" },
  ...extra,
});

function errorsOf(
  r: { ok: true } | { ok: false; errors: Parameters<typeof formatFieldError>[0][] },
) {
  return r.ok ? [] : r.errors.map(formatFieldError);
}

describe("decodeBase64Strict()", () => {
  const cases: [string, number | string][] = [
    ["YWJj", "abc"],
    ["YWI=", "ab"],
    ["YQ==", "a"],
    ["YW\nJj\r\n", "abc"],
    ["", ""],
    ["abc", 0],
    ["not*base64", 3],
    ["YQ=", 3],
    ["Y===", 1],
    ["YQ==YQ==", 4],
  ];
  for (const [input, expected] of cases) {
    test(`reads ${JSON.stringify(input)} as Go's standard encoding does`, () => {
      const r = decodeBase64Strict(input);
      if (typeof expected === "number") expect(r).toEqual({ badByte: expected });
      else expect("bytes" in r && r.bytes.toString()).toBe(expected);
    });
  }
});

describe("validateConfigMap()", () => {
  test("accepts data and binaryData, defaulting the namespace", () => {
    const r = validateConfigMap(
      cm({ data: { "app.conf": "x" }, binaryData: { blob: b64("\x00\x01") } }),
    );
    expect(r.ok && r.object.metadata.namespace).toBe("default");
  });

  const cases: [string, Record<string, unknown>, string][] = [
    [
      "a key with a space",
      { data: { "a b": "x" } },
      `data[a b]: Invalid value: "a b": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')`,
    ],
    ["a key '..'", { data: { "..": "x" } }, `data[..]: Invalid value: "..": must not be '..'`],
    [
      "a key starting with '..'",
      { data: { "..data": "x" } },
      `data[..data]: Invalid value: "..data": must not start with '..'`,
    ],
    [
      "a key in data and binaryData",
      { data: { k: "x" }, binaryData: { k: b64("y") } },
      'data[k]: Invalid value: "k": duplicate of key present in binaryData',
    ],
    [
      "binaryData that is no base64",
      { binaryData: { k: "no!" } },
      'binaryData[k]: Invalid value: "<secret contents redacted>": illegal base64 data at input byte 2',
    ],
    [
      "more than 1 MiB",
      { data: { k: "x".repeat(1024 * 1024 + 1) } },
      "data: Too long: may not be more than 1048576 bytes",
    ],
    [
      "a value that is no string",
      { data: { k: 1 } },
      "data[k]: Invalid value: 1: must be of type string",
    ],
    [
      "a name that is no DNS subdomain",
      { metadata: { name: "Cfg_1" } },
      'metadata.name: Invalid value: "Cfg_1"',
    ],
  ];
  for (const [what, extra, expected] of cases) {
    test(`rejects ${what} naming the field`, () => {
      expect(errorsOf(validateConfigMap(cm(extra)))).toContainEqual(
        expect.stringContaining(expected),
      );
    });
  }

  test("counts binaryData by its decoded size", () => {
    const half = Buffer.alloc(600 * 1024).toString("base64");
    expect(errorsOf(validateConfigMap(cm({ binaryData: { a: half } })))).toEqual([]);
    expect(errorsOf(validateConfigMap(cm({ binaryData: { a: half, b: half } })))).toEqual([
      "data: Too long: may not be more than 1048576 bytes",
    ]);
  });
});

describe("validateSecret()", () => {
  test("writes stringData into data (winning), and defaults the type to Opaque", () => {
    const r = validateSecret(
      secret({ data: { a: b64("1"), b: b64("2") }, stringData: { b: "two" } }),
    );
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.object.type).toBe("Opaque");
    expect(r.object).not.toHaveProperty("stringData");
    expect(r.object.data).toEqual({ a: b64("1"), b: b64("two") });
  });

  const cases: [string, Record<string, unknown>, string][] = [
    [
      "data that is no base64, without showing it",
      { data: { k: "abc" } },
      'data[k]: Invalid value: "<secret contents redacted>": illegal base64 data at input byte 0',
    ],
    [
      "a bad key in stringData",
      { stringData: { "a/b": "x" } },
      'stringData[a/b]: Invalid value: "a/b"',
    ],
    [
      "a dockerconfigjson Secret without its key",
      { type: "kubernetes.io/dockerconfigjson", data: { other: b64("{}") } },
      "data[.dockerconfigjson]: Required value",
    ],
    [
      "a dockerconfigjson Secret that is no JSON object",
      { type: "kubernetes.io/dockerconfigjson", stringData: { ".dockerconfigjson": "[1]" } },
      'data[.dockerconfigjson]: Invalid value: "<secret contents redacted>": not a JSON object',
    ],
    [
      "a tls Secret without its key",
      { type: "kubernetes.io/tls", stringData: { "tls.crt": "c" } },
      "data[tls.key]: Required value",
    ],
    [
      "a basic-auth Secret with neither username nor password",
      { type: "kubernetes.io/basic-auth", stringData: { x: "y" } },
      "data[username]: Required value",
    ],
    [
      "more than 1 MiB",
      { stringData: { k: "x".repeat(1024 * 1024 + 1) } },
      "data: Too long: may not be more than 1048576 bytes",
    ],
  ];
  for (const [what, extra, expected] of cases) {
    test(`rejects ${what} naming the field`, () => {
      const errors = errorsOf(validateSecret(secret(extra)));
      expect(errors).toContainEqual(expect.stringContaining(expected));
      for (const e of errors) expect(e).not.toContain("abc");
    });
  }
});

describe("validateImmutableUpdate()", () => {
  const v = (data: Record<string, string>, immutable?: boolean) => {
    const r = validateConfigMap(cm({ data, ...(immutable === undefined ? {} : { immutable }) }));
    if (!r.ok) throw new Error("invalid");
    return r.object;
  };

  test("lets a mutable object change, and an immutable one keep its data", () => {
    expect(validateImmutableUpdate(v({ a: "1" }), v({ a: "2" }, true))).toEqual([]);
    expect(validateImmutableUpdate(v({ a: "1" }, true), v({ a: "1" }, true))).toEqual([]);
  });

  test("refuses a change of an immutable object's data or immutability", () => {
    expect(
      validateImmutableUpdate(v({ a: "1" }, true), v({ a: "2" })).map(formatFieldError),
    ).toEqual([
      "immutable: Forbidden: field is immutable when `immutable` is set",
      "data: Forbidden: field is immutable when `immutable` is set",
    ]);
  });
});
