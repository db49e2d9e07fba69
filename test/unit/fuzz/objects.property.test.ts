// Properties of the object decoders and validators (validatePod, validateConfigMap,
// validateSecret, validateDaemonSet) and of the defaults, under valid and near-valid objects (a
// valid one with fields removed, retyped, made huge or given random values): each gives a valid
// object or field errors with a path and a message, never another exception, and leaves its input
// untouched; a valid object stays valid once defaulted, and defaulting is idempotent.
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { validateDaemonSet } from "../../../src/api/daemonset.ts";
import { applyDaemonSetDefaults } from "../../../src/api/daemonset-defaults.ts";
import {
  applyPodDefaults,
  type FieldError,
  formatFieldError,
  validateConfigMap,
  validatePod,
  validateSecret,
} from "../../../src/api/index.ts";
import { objectsUsedBy } from "../../../src/api/pod-objects.ts";
import { getPodQOS } from "../../../src/api/qos.ts";
import { fuzz, fuzzTimeout } from "../../lib/fuzz.ts";
import {
  nearValid,
  type Obj,
  validConfigMap,
  validDaemonSet,
  validPod,
  validSecret,
} from "../../lib/kube-arbitraries.ts";

const TIMEOUT = fuzzTimeout(60_000);

/** Every error names a field (a dotted path, or "" for the whole object) and formats to text. */
function checkErrors(errors: readonly FieldError[]): void {
  expect(errors.length).toBeGreaterThan(0);
  for (const e of errors) {
    expect(typeof e.field).toBe("string");
    expect(typeof formatFieldError(e)).toBe("string");
  }
}

/** Runs `validate` on a copy, asserting the input is left as it was. */
function untouched<R>(obj: Obj, validate: (o: unknown) => R): R {
  const before = structuredClone(obj);
  const result = validate(obj);
  expect(obj).toEqual(before);
  return result;
}

function checkPod(obj: Obj, mustPass: boolean): void {
  const result = untouched(obj, validatePod);
  if (!result.ok) {
    if (mustPass) throw new Error(`a valid pod was refused: ${JSON.stringify(result.errors)}`);
    checkErrors(result.errors);
    return;
  }
  const defaulted = applyPodDefaults(result.pod);
  expect(applyPodDefaults(defaulted)).toEqual(defaulted);
  const again = validatePod(JSON.parse(JSON.stringify(defaulted)));
  if (!again.ok) throw new Error(`the defaulted pod is invalid: ${JSON.stringify(again.errors)}`);
  expect(applyPodDefaults(again.pod)).toEqual(defaulted);
  objectsUsedBy(defaulted);
  getPodQOS(defaulted);
}

function checkConfigObject(obj: Obj, mustPass: boolean): void {
  const validate = (o: unknown) =>
    obj.kind === "Secret" ? validateSecret(o) : validateConfigMap(o);
  const result = untouched(obj, validate);
  if (!result.ok) {
    if (mustPass) throw new Error(`a valid object was refused: ${JSON.stringify(result.errors)}`);
    checkErrors(result.errors);
    return;
  }
  // What validation gives is stored and read again: it validates to itself.
  const again = validate(JSON.parse(JSON.stringify(result.object)));
  if (!again.ok) throw new Error(`the object is invalid again: ${JSON.stringify(again.errors)}`);
  expect(again.object).toEqual(result.object);
}

function checkDaemonSet(obj: Obj, mustPass: boolean): void {
  const result = untouched(obj, validateDaemonSet);
  if (!result.ok) {
    if (mustPass)
      throw new Error(`a valid DaemonSet was refused: ${JSON.stringify(result.errors)}`);
    checkErrors(result.errors);
    return;
  }
  const ds = result.daemonSet;
  expect(applyDaemonSetDefaults(ds)).toEqual(ds);
  const again = validateDaemonSet(JSON.parse(JSON.stringify(ds)));
  if (!again.ok)
    throw new Error(`the defaulted DaemonSet is invalid: ${JSON.stringify(again.errors)}`);
  expect(again.daemonSet).toEqual(ds);
}

describe("object validation under generated objects", () => {
  test(
    "validatePod accepts every valid pod, and defaulting it is idempotent",
    async () => {
      await fuzz("objects.pod.valid", validPod, (o) => checkPod(o, true), {
        seed: 30_311,
        runs: 120,
      });
    },
    TIMEOUT,
  );

  test(
    "validatePod gives a pod or field errors for near-valid pods",
    async () => {
      await fuzz("objects.pod.near-valid", nearValid(validPod), (o) => checkPod(o, false), {
        seed: 30_312,
        runs: 200,
      });
    },
    TIMEOUT,
  );

  test(
    "ConfigMaps and Secrets validate to themselves, or give field errors",
    async () => {
      const valid = fc.oneof(validConfigMap, validSecret);
      await fuzz("objects.config.valid", valid, (o) => checkConfigObject(o, true), {
        seed: 30_313,
        runs: 150,
      });
      await fuzz(
        "objects.config.near-valid",
        nearValid(valid),
        (o) => checkConfigObject(o, false),
        {
          seed: 30_314,
          runs: 200,
        },
      );
    },
    TIMEOUT,
  );

  test(
    "validateDaemonSet defaults idempotently, or gives field errors",
    async () => {
      await fuzz("objects.daemonset.valid", validDaemonSet, (o) => checkDaemonSet(o, true), {
        seed: 30_315,
        runs: 80,
      });
      const near = nearValid(validDaemonSet);
      await fuzz("objects.daemonset.near-valid", near, (o) => checkDaemonSet(o, false), {
        seed: 30_316,
        runs: 120,
      });
    },
    TIMEOUT,
  );

  test(
    "gives field errors for any JSON value, and never throws",
    async () => {
      const anyValue = fc.jsonValue({ maxDepth: 4 });
      await fuzz(
        "objects.any-json",
        anyValue,
        (v) => {
          for (const validate of [
            validatePod,
            validateConfigMap,
            validateSecret,
            validateDaemonSet,
          ]) {
            const result = validate(v);
            if (!result.ok) checkErrors(result.errors);
          }
        },
        { seed: 30_317, runs: 300 },
      );
    },
    TIMEOUT,
  );
});
