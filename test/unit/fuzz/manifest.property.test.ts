// Properties of the manifest file parser (the static pod source's parseManifestFile) under
// arbitrary and hostile text, and under valid and near-valid Pods, ConfigMaps and Secrets written
// as YAML or JSON, one or several documents a file: it gives pods and objects, or one bounded
// line naming the file; it never throws; what it gives is defaulted and valid, and defaulting it
// again changes nothing.
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { parseManifestFile } from "../../../src/agent/sources/parse.ts";
import { applyPodDefaults, type Pod, validatePod } from "../../../src/api/index.ts";
import { fuzz, fuzzTimeout } from "../../lib/fuzz.ts";
import {
  arbitraryText,
  hostileYaml,
  nearValid,
  type Obj,
  validConfigMap,
  validPod,
  validSecret,
  writeAs,
  writeObject,
} from "../../lib/kube-arbitraries.ts";

const ctx = { path: "/etc/fleetlet/manifests/web.yaml", nodeName: "dev1" };
/** The longest message a bad manifest may give (it is logged and becomes an event). */
const MAX_MESSAGE = 4096;
/** Generous: the suite's machine may be busy; scripts/fuzz reports the time. */
const TIMEOUT = fuzzTimeout(60_000);

/** Parses `text`, asserting the result's shape; returns it. */
function parseChecked(text: string) {
  const result = parseManifestFile(text, ctx);
  if (!result.ok) {
    expect(result.message.startsWith(`manifest ${ctx.path}`)).toBe(true);
    expect(result.message).not.toContain("\n");
    expect(result.message.length).toBeLessThanOrEqual(MAX_MESSAGE);
    return result;
  }
  for (const pod of result.pods) checkDefaultedPod(pod);
  return result;
}

/** A pod the parser gives is valid, of this node, and defaulting it again changes nothing. */
function checkDefaultedPod(pod: Pod): void {
  expect(pod.spec.nodeName).toBe(ctx.nodeName);
  expect(pod.metadata.name.endsWith(`-${ctx.nodeName}`)).toBe(true);
  expect(applyPodDefaults(pod)).toEqual(pod);
  const again = validatePod(JSON.parse(JSON.stringify(pod)));
  if (!again.ok) throw new Error(`the parsed pod is not valid: ${JSON.stringify(again.errors)}`);
}

/** Several objects, each its own name, written as documents of one file. */
const manyObjects = fc
  .array(fc.oneof(validPod, validConfigMap, validSecret), { minLength: 1, maxLength: 4 })
  .map((objs) =>
    objs.map((o, i) => ({ ...o, metadata: { ...(o.metadata as Obj), name: `o${i}` } }) as Obj),
  );

function joinDocuments(objs: Obj[], as: string): string {
  if (as === "json" && objs.length === 1) return writeObject(objs[0], as);
  return objs.map((o) => `---\n${writeObject(o, as === "json" ? "flow" : as)}`).join("");
}

describe("parseManifestFile under arbitrary input", () => {
  test(
    "gives pods or one line naming the file for any text, and never throws",
    async () => {
      await fuzz("manifest.text", arbitraryText, (text) => void parseChecked(text), {
        seed: 30_301,
        runs: 200,
      });
    },
    TIMEOUT,
  );

  test(
    "refuses alias bombs, self-referencing aliases and deep nesting with a message",
    async () => {
      await fuzz("manifest.hostile-yaml", hostileYaml, (text) => void parseChecked(text), {
        seed: 30_302,
        runs: 40,
      });
    },
    TIMEOUT,
  );

  test(
    "gives every pod, ConfigMap and Secret of a valid file, defaulted",
    async () => {
      await fuzz(
        "manifest.valid",
        fc.tuple(manyObjects, writeAs),
        ([objs, as]) => {
          const result = parseChecked(joinDocuments(objs, as));
          if (!result.ok) throw new Error(result.message);
          const pods = objs.filter((o) => o.kind === "Pod");
          expect(result.pods.length).toBe(pods.length);
          expect(result.objects.length).toBe(objs.length - pods.length);
          pods.forEach((o, i) => {
            const decoded = validatePod(o);
            if (!decoded.ok) throw new Error(JSON.stringify(decoded.errors));
            const want = applyPodDefaults(decoded.pod).spec;
            expect(result.pods[i]?.spec).toEqual({ ...want, nodeName: ctx.nodeName });
          });
        },
        { seed: 30_303, runs: 60 },
      );
    },
    TIMEOUT,
  );

  test(
    "gives a valid result or a bounded message for near-valid objects",
    async () => {
      const objs = fc.array(nearValid(fc.oneof(validPod, validConfigMap, validSecret)), {
        minLength: 1,
        maxLength: 2,
      });
      await fuzz(
        "manifest.near-valid",
        fc.tuple(objs, writeAs),
        ([list, as]) => void parseChecked(joinDocuments(list, as)),
        { seed: 30_304, runs: 80 },
      );
    },
    TIMEOUT,
  );
});
