import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseManifestFile } from "../../../src/agent/sources/index.ts";
import { repoRoot } from "../../lib/testbed.ts";

const dir = join(repoRoot, "manifests");

describe("the example manifests", () => {
  for (const name of readdirSync(dir).filter((n) => n.endsWith(".yaml"))) {
    test(`${name} is valid`, () => {
      const r = parseManifestFile(readFileSync(join(dir, name), "utf8"), {
        path: name,
        nodeName: "dev1",
      });
      expect(r.ok ? "" : r.message).toBe("");
      expect(r.ok && r.pods.length).toBeGreaterThan(0);
    });
  }
});
