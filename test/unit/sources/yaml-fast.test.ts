import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { parseManifestFile } from "../../../src/agent/sources/index.ts";
import { plainPairs, readPlainYaml } from "../../../src/agent/sources/yaml-fast.ts";
import { sleeperManifest } from "../../lib/manifests.ts";
import { generateYaml, prng } from "../../lib/yaml-gen.ts";

/** The yaml package's reading of a one-document text: its JSON, or "error". */
function reference(text: string): string {
  const docs = parseAllDocuments(text);
  if (docs.length > 1 || docs.some((d) => d.errors.length > 0)) return "error";
  try {
    return JSON.stringify(docs.length === 0 ? null : docs[0]?.toJS({ maxAliasCount: 100 }));
  } catch {
    return "error";
  }
}

const examples = join(import.meta.dir, "../../../manifests");

describe("readPlainYaml()", () => {
  test("reads the example manifests and a plain pod as the yaml package does", () => {
    const texts = [
      sleeperManifest("s", "busybox:1.36"),
      ...["web.yaml", "job.yaml", "with-init.yaml"].map((f) =>
        readFileSync(join(examples, f), "utf8"),
      ),
    ];
    for (const text of texts) {
      const fast = readPlainYaml(text);
      expect(fast).toBeDefined();
      expect(JSON.stringify(fast?.value)).toBe(reference(text));
    }
  });

  test.each([
    ["a key given twice", "a: 1\nb: 2\na: 3\n"],
    ["a key given twice in a flow mapping", "a: {b: 1, b: 2}\n"],
    ["a key given twice, once quoted", "a: 1\n'a': 2\n"],
    ["a repeat hidden by a flow key without a value", "a: {b: x,c}\nd: 1\nd: 2\n"],
    ["a merge key", "a: &x {b: 1}\nc:\n  <<: *x\n"],
    ["an anchor and an alias", "a: &x [1]\nb: *x\n"],
    ["a tag", "a: !!int '3'\n"],
    ["a null key", "~: a\n"],
    ["a null key spelled out", "null: a\n"],
    ["an empty key", ": a\n"],
    ["a key YAML reads as a bool", "True: a\n"],
    ["several documents", "a: 1\n---\nb: 2\n"],
    ["a directive", "%YAML 1.2\n---\na: 1\n"],
    ["a complex key", "? [a, b]\n: 1\n"],
    ["a flow collection as a key", "[a, b]: 1\n"],
    ["a signed octal number", "a: -0o17\n"],
    ["a tab", "a:\n\tb: 1\n"],
    ["a carriage return", "a: 1\r\nb: 2\r\n"],
    ["an escape", 'a: "x\\ty"\n'],
    ["a quoted scalar over two lines", 'a: "x\n  y"\nb: 1\n'],
    ["two pairs on one line", "a: b: c\n"],
    ["a __proto__ key", "__proto__: {a: 1}\n"],
    ["a byte order mark", "\ufeffa: 1\n"],
    ["a block scalar with an indentation indicator", "a: |2\n   x\n"],
    ["a block scalar header on its own line", "a:\n  |\n  text\n"],
    ["a flow collection over two lines", "a: [b,\n  c]\n"],
    ["a trailing comma", "a: [b, ]\n"],
    ["a list document", "- a\n- b\n"],
  ])("leaves %s to the yaml package", (_what, text) => {
    expect(readPlainYaml(text)).toBeUndefined();
  });

  test("counts every key of block and flow mappings, in sequences too", () => {
    expect(plainPairs("a: 1\nb:\n  - c: 2\n    d: [e, f: 3]\n  - {g: 4, h}\n")).toBe(7);
    expect(plainPairs("a: |\n  k: v\n  - x: y\nb: 1\n")).toBe(2);
  });

  test("takes no text the yaml package reads otherwise, over generated texts", () => {
    let taken = 0;
    const mismatches: string[] = [];
    for (let seed = 1; seed <= 4000; seed++) {
      const text = generateYaml(prng(seed), seed % 2 === 0);
      const fast = readPlainYaml(text);
      if (fast === undefined) continue;
      taken++;
      if (JSON.stringify(fast.value) !== reference(text)) mismatches.push(`seed ${seed}:\n${text}`);
    }
    expect(mismatches).toEqual([]);
    // The generated texts exercise the fast path, not only the way around it.
    expect(taken).toBeGreaterThan(800);
  });
});

describe("parseManifestFile() on both paths", () => {
  test("gives the same pods whether the fast path or the yaml package reads the text", () => {
    const text = readFileSync(join(examples, "web.yaml"), "utf8");
    const ctx = { path: "/m/web.yaml", nodeName: "dev1" };
    expect(readPlainYaml(text)).toBeDefined();
    // A tab in a comment sends the same manifest to the yaml package.
    const slow = `${text}#\tend\n`;
    expect(readPlainYaml(slow)).toBeUndefined();
    expect(parseManifestFile(slow, ctx)).toEqual(parseManifestFile(text, ctx));
  });

  test("still refuses a key given twice, naming the line", () => {
    const result = parseManifestFile(`${sleeperManifest("s", "busybox:1.36")}kind: Pod\n`, {
      path: "/m/s.yaml",
      nodeName: "dev1",
    });
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.message).toMatch(/invalid YAML: Map keys must be unique at line/);
  });
});
