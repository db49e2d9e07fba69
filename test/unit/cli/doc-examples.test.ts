import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readObjects } from "../../../src/cli/objects.ts";
import { deployExamples } from "../../lib/doc-examples.ts";

const dir = mkdtempSync(join(tmpdir(), "fleetlet-doc-examples-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("the examples of docs/deploy.md", () => {
  test("are a DaemonSet, and a ConfigMap with a DaemonSet whose pod uses it, valid as `fleetlet apply` reads them", () => {
    const objects = deployExamples().map(({ file, text }) => {
      writeFileSync(join(dir, file), text);
      return readObjects([join(dir, file)], undefined, "applied").map((o) => `${o.kind}/${o.name}`);
    });
    expect(objects).toEqual([
      ["DaemonSet/hello"],
      ["ConfigMap/hello-page", "DaemonSet/hello-page"],
    ]);
  });
});
