import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { DaemonSet } from "../../../src/api/daemonset.ts";
import { CliError } from "../../../src/cli/errors.ts";
import { readObjects } from "../../../src/cli/objects.ts";

const dir = mkdtempSync(join(tmpdir(), "fleetlet-cli-objects-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function read(name: string, text: string) {
  writeFileSync(join(dir, name), text);
  return readObjects([join(dir, name)], undefined, "applied");
}

const daemonSet = (volumeMode: string) => `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: main, image: busybox}]
      volumes: [{name: cfg, configMap: {name: cfg, defaultMode: ${volumeMode}}}]
`;

describe("readObjects() (the files of fleetlet apply -f)", () => {
  test("an alias that refers to the node holding it is a clear error, not a stack overflow", () => {
    const text =
      "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: x}\nspec: &s\n  template: *s\n";
    expect(() => read("cycle.yaml", text)).toThrow(CliError);
    expect(() => read("cycle.yaml", text)).toThrow(
      `error parsing ${join(dir, "cycle.yaml")}: an alias refers to a node that holds it (a cycle)`,
    );
  });

  test("reads 0644 as an octal file mode, as the agent reads its manifests", () => {
    const ds = read("mode.yaml", daemonSet("0644"))[0]?.object as DaemonSet | undefined;
    const volumes = ds?.spec.template.spec?.volumes;
    expect(volumes?.[0]?.configMap?.defaultMode).toBe(0o644);
  });
});
