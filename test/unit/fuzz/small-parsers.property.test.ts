// Properties of the small parsers the object parsers and the APIs use: label and field selectors,
// Go durations, the downward API's field paths and resource references, and the name checks.
// Each gives its value or its documented error for any text; what it gives agrees with a plain
// model of the syntax; and what the validators accept, the readers can read.
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { nodeMatches } from "../../../src/api/affinity.ts";
import { selectorMatches } from "../../../src/api/daemonset.ts";
import { DurationParseError, parseDuration } from "../../../src/api/duration.ts";
import { type FieldError, FieldPath } from "../../../src/api/field-error.ts";
import { podFieldValue, resourceFieldValue } from "../../../src/api/fieldpath.ts";
import {
  isConfigMapKey,
  isDNS1123Label,
  isDNS1123Subdomain,
  isEnvVarName,
  isQualifiedName,
  isValidLabelValue,
  isValidPortName,
} from "../../../src/api/names.ts";
import {
  parseFieldSelector,
  parseLabelSelector,
  podFields,
  SelectorError,
} from "../../../src/api/selectors.ts";
import type { Pod } from "../../../src/api/types.ts";
import { validateFieldRef, validateResourceFieldRef } from "../../../src/api/validate-env.ts";
import { fuzz, fuzzTimeout } from "../../lib/fuzz.ts";

const TIMEOUT = fuzzTimeout(60_000);
const spaces = fc.constantFrom("", " ", "  ");
/** Label keys and values; the names of Object's own members too, which a plain object lookup
 * would find on any map. */
const word = fc.oneof(
  { weight: 5, arbitrary: fc.stringMatching(/^[a-z0-9]([a-z0-9._-]{0,6}[a-z0-9])?$/) },
  fc.constantFrom("constructor", "toString", "hasOwnProperty", "valueOf"),
);

type Req =
  | { op: "=" | "==" | "!="; key: string; value: string }
  | { op: "in" | "notin"; key: string; values: string[] }
  | { op: "exists" | "!exists"; key: string };

const requirement: fc.Arbitrary<Req> = fc.oneof(
  fc.record({
    op: fc.constantFrom("=" as const, "==" as const, "!=" as const),
    key: word,
    value: word,
  }),
  fc.record({
    op: fc.constantFrom("in" as const, "notin" as const),
    key: word,
    values: fc.array(word, { minLength: 1, maxLength: 3 }),
  }),
  fc.record({ op: fc.constantFrom("exists" as const, "!exists" as const), key: word }),
);

function writeReq(r: Req, s: string): string {
  if ("values" in r) return `${r.key} ${r.op}${s}(${r.values.join(`,${s}`)})`;
  if ("value" in r) return `${r.key}${s}${r.op}${s}${r.value}`;
  return r.op === "exists" ? r.key : `!${r.key}`;
}

function holds(r: Req, labels: Record<string, string>): boolean {
  const v = Object.hasOwn(labels, r.key) ? labels[r.key] : undefined;
  switch (r.op) {
    case "exists":
      return v !== undefined;
    case "!exists":
      return v === undefined;
    case "=":
    case "==":
      return v === r.value;
    case "!=":
      return v !== r.value;
    case "in":
      return v !== undefined && r.values.includes(v);
    case "notin":
      return v === undefined || !r.values.includes(v);
  }
}

/** Runs `parse`, allowing only `errorClass` to be thrown; returns the value or undefined. */
function parsesOrThrows<T>(
  parse: () => T,
  errorClass: new (...a: never[]) => Error,
): T | undefined {
  try {
    return parse();
  } catch (err) {
    expect(err).toBeInstanceOf(errorClass);
    return undefined;
  }
}

const selectorText = fc.oneof(
  fc.string({ maxLength: 60 }),
  fc
    .array(
      fc.constantFrom("a", "b", "=", "!", "==", "!=", ",", " ", "(", ")", "in", "notin", "x/y"),
    )
    .map((p) => p.join("")),
  fc.integer({ min: 1000, max: 40_000 }).map((n) => `a${" ".repeat(n)}x`),
);

describe("selectors under arbitrary input", () => {
  test("a DaemonSet selector and a node affinity term match as their requirements say", async () => {
    const op = fc.constantFrom(
      "In" as const,
      "NotIn" as const,
      "Exists" as const,
      "DoesNotExist" as const,
    );
    const req = fc.record({ key: word, operator: op, values: fc.array(word, { maxLength: 2 }) });
    const model = (
      r: { key: string; operator: string; values: string[] },
      l: Record<string, string>,
    ) =>
      holds(
        r.operator === "Exists" || r.operator === "DoesNotExist"
          ? { op: r.operator === "Exists" ? "exists" : "!exists", key: r.key }
          : { op: r.operator === "In" ? "in" : "notin", key: r.key, values: r.values },
        l,
      );
    await fuzz(
      "selectors.match-expressions",
      fc.tuple(
        fc.array(req, { minLength: 1, maxLength: 3 }),
        fc.dictionary(word, word, { maxKeys: 3 }),
      ),
      ([reqs, l]) => {
        const want = reqs.every((r) => model(r, l));
        expect(selectorMatches({ matchExpressions: reqs }, l)).toBe(want);
        const affinity = {
          nodeAffinity: {
            requiredDuringSchedulingIgnoredDuringExecution: {
              nodeSelectorTerms: [{ matchExpressions: reqs }],
            },
          },
        };
        expect(nodeMatches({ affinity }, "dev1", l)).toBe(want);
      },
      { seed: 30_331, runs: 300 },
    );
  });

  test(
    "a label selector parses and matches as its terms say, or throws SelectorError",
    async () => {
      await fuzz(
        "selectors.label.any",
        selectorText,
        (text) => {
          const sel = parsesOrThrows(() => parseLabelSelector(text), SelectorError);
          if (sel) expect(typeof sel({ a: "b" })).toBe("boolean");
        },
        { seed: 30_321, runs: 300 },
      );
      const labels = fc.dictionary(word, word, { maxKeys: 4 });
      await fuzz(
        "selectors.label.model",
        fc.tuple(fc.array(requirement, { maxLength: 4 }), spaces, labels),
        ([reqs, s, l]) => {
          const sel = parseLabelSelector(reqs.map((r) => writeReq(r, s)).join(`,${s}`));
          expect(sel(l)).toBe(reqs.every((r) => holds(r, l)));
        },
        { seed: 30_322, runs: 300 },
      );
    },
    TIMEOUT,
  );

  test(
    "a field selector parses and matches as its terms say, or throws SelectorError",
    async () => {
      await fuzz(
        "selectors.field.any",
        selectorText,
        (text) => {
          const sel = parsesOrThrows(() => parseFieldSelector(text, podFields), SelectorError);
          if (sel) expect(typeof sel(pod)).toBe("boolean");
        },
        { seed: 30_323, runs: 300 },
      );
      const unknown = fc.oneof(
        fc.constantFrom("constructor", "toString", "__proto__", "hasOwnProperty", "status.hostIP"),
        fc.stringMatching(/^[a-z][a-z.]{0,12}$/).filter((f) => !Object.hasOwn(podFields, f)),
      );
      await fuzz(
        "selectors.field.unknown",
        fc.tuple(unknown, fc.constantFrom("=", "!="), word),
        ([f, op, v]) => {
          expect(() => parseFieldSelector(`${f}${op}${v}`, podFields)).toThrow(SelectorError);
        },
        { seed: 30_330, runs: 100 },
      );
      const field = fc.constantFrom("metadata.name", "metadata.namespace", "spec.nodeName");
      const term = fc.tuple(
        field,
        fc.constantFrom("=", "==", "!="),
        fc.oneof(word, fc.constant("web")),
      );
      await fuzz(
        "selectors.field.model",
        fc.tuple(fc.array(term, { maxLength: 3 }), spaces),
        ([terms, s]) => {
          const sel = parseFieldSelector(
            terms.map(([f, op, v]) => `${f}${s}${op}${s}${v}`).join(","),
            podFields,
          );
          const have: Record<string, string> = {
            "metadata.name": "web",
            "metadata.namespace": "default",
            "spec.nodeName": "dev1",
          };
          expect(sel(pod)).toBe(terms.every(([f, op, v]) => (have[f] === v) !== (op === "!=")));
        },
        { seed: 30_324, runs: 300 },
      );
    },
    TIMEOUT,
  );
});

const units: [string, number][] = [
  ["ns", 1e-6],
  ["us", 1e-3],
  ["µs", 1e-3],
  ["ms", 1],
  ["s", 1000],
  ["m", 60_000],
  ["h", 3_600_000],
];

/** The most a Go duration holds: 2^63-1 nanoseconds, in ms. */
const MAX_DURATION_MS = 9_223_372_036_854.775;

describe("parseDuration under arbitrary input", () => {
  test("gives a finite number of ms within Go's range, or a DurationParseError", async () => {
    const text = fc.oneof(
      fc.string({ maxLength: 30 }),
      fc.stringMatching(/^[-+]?([0-9]{0,25}(\.[0-9]{0,5})?(ns|us|µs|ms|s|m|h|d|x)?){1,4}$/),
    );
    await fuzz(
      "duration.any",
      text,
      (t) => {
        const ms = parsesOrThrows(() => parseDuration(t), DurationParseError);
        if (ms === undefined) return;
        expect(Number.isFinite(ms)).toBe(true);
        expect(Math.abs(ms)).toBeLessThanOrEqual(MAX_DURATION_MS);
      },
      { seed: 30_325, runs: 1000 },
    );
  });

  test("sums its terms, each a number times its unit", async () => {
    const term = fc.tuple(fc.nat({ max: 10_000 }), fc.nat({ max: 999 }), fc.constantFrom(...units));
    await fuzz(
      "duration.model",
      fc.tuple(fc.constantFrom("", "-", "+"), fc.array(term, { minLength: 1, maxLength: 4 })),
      ([sign, terms]) => {
        const text = sign + terms.map(([i, f, [u]]) => `${i}.${f}${u}`).join("");
        const want = terms.reduce((sum, [i, f, [, ms]]) => sum + Number(`${i}.${f}`) * ms, 0);
        const got = parseDuration(text);
        expect(Math.abs(got - (sign === "-" ? -want : want))).toBeLessThanOrEqual(
          1e-9 * want + 1e-9,
        );
      },
      { seed: 30_326, runs: 500 },
    );
  });
});

const pod: Pod = {
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "web", namespace: "default", uid: "u1", labels: { app: "web" } },
  spec: {
    nodeName: "dev1",
    containers: [
      { name: "c", image: "i", resources: { limits: { cpu: "500m", memory: "64Mi" } } },
      { name: "d", image: "i" },
    ],
  },
};
const podCtx = { nodeName: "dev1", podIP: "10.0.0.2", podIPs: ["10.0.0.2"], hostIP: "10.0.0.1" };
const allocatable = { cpu: 2000, memory: 2 ** 30, ephemeralStorage: 2 ** 34 };
const ENV_PATHS = [
  ...["metadata.name", "metadata.namespace", "metadata.uid", "metadata.labels"],
  ...["metadata.annotations", "spec.nodeName", "spec.serviceAccountName", "status.hostIP"],
  ...["status.hostIPs", "status.podIP", "status.podIPs"],
];

describe("downward API field paths and resource references", () => {
  test("a fieldRef the validator accepts is read; any other path gives an Error", async () => {
    const path = fc.oneof(
      fc.constantFrom(...ENV_PATHS, "status.phase", "metadata.labels['app']"),
      fc.string({ maxLength: 30 }),
      fc
        .tuple(
          fc.constantFrom("metadata.labels", "metadata.annotations", "metadata.name"),
          fc.oneof(fc.string({ maxLength: 12 }), word),
        )
        .map(([f, k]) => `${f}['${k}']`),
    );
    await fuzz(
      "fieldpath.fieldRef",
      path,
      (fieldPath) => {
        const errs: FieldError[] = validateFieldRef({ fieldPath }, ENV_PATHS, FieldPath.root("f"));
        let value: string | undefined;
        try {
          value = podFieldValue(pod, fieldPath, podCtx);
        } catch (err) {
          expect(err).toBeInstanceOf(Error);
          if (errs.length === 0)
            throw new Error(`${fieldPath} is valid but cannot be read: ${err}`);
          return;
        }
        expect(typeof value).toBe("string");
      },
      { seed: 30_327, runs: 500 },
    );
  });

  test("a resourceFieldRef the validator accepts reads a whole non-negative number", async () => {
    const ref = fc.record(
      {
        containerName: fc.constantFrom("c", "d"),
        resource: fc.constantFrom(
          "limits.cpu",
          "requests.cpu",
          "limits.memory",
          "requests.memory",
          "limits.ephemeral-storage",
          "limits.gpu",
        ),
        divisor: fc.oneof(
          fc.constantFrom(
            "1",
            "1m",
            "1Mi",
            "1Gi",
            "0",
            "0.0",
            "0m",
            "+0",
            "-0",
            "1k",
            "1e3",
            "0.001",
            "1000m",
          ),
          fc.stringMatching(/^[+-]?[0-9]{1,3}(\.[0-9]{0,3})?(m|k|Mi|Gi|e3|)$/),
        ),
      },
      { requiredKeys: ["containerName", "resource"] },
    );
    await fuzz(
      "fieldpath.resourceFieldRef",
      ref,
      (r) => {
        const errs = validateResourceFieldRef(r, FieldPath.root("r"), true);
        if (errs.length > 0) return;
        const text = resourceFieldValue(pod, undefined, r, allocatable);
        expect(text).toMatch(/^\d+$/);
      },
      { seed: 30_328, runs: 500 },
    );
  });
});

describe("name checks under arbitrary input", () => {
  const checks = [
    ["DNS-1123 label", isDNS1123Label, 63],
    ["DNS-1123 subdomain", isDNS1123Subdomain, 253],
    ["qualified name", isQualifiedName, 317],
    ["label value", isValidLabelValue, 63],
    ["port name", isValidPortName, 15],
    ["env var name", isEnvVarName, Number.POSITIVE_INFINITY],
    ["config key", isConfigMapKey, 253],
  ] as const;
  test(
    "give a list of problems, empty only for a value within the syntax's bounds",
    async () => {
      const name = fc.oneof(
        fc.string({ maxLength: 80 }),
        fc.stringMatching(/^[a-zA-Z0-9][-a-zA-Z0-9_.]{0,70}(\/[a-z0-9]{1,10})?$/),
        fc.integer({ min: 60, max: 300 }).map((n) => "a".repeat(n)),
        fc.integer({ min: 1000, max: 50_000 }).map((n) => `${"a-".repeat(n)}!`),
      );
      await fuzz(
        "names",
        name,
        (v) => {
          for (const [, check, max] of checks) {
            const problems = check(v);
            expect(Array.isArray(problems)).toBe(true);
            if (problems.length === 0) expect(v.length).toBeLessThanOrEqual(max);
          }
          // A DNS label is a subdomain, a qualified name and a label value.
          if (isDNS1123Label(v).length === 0) {
            expect(isDNS1123Subdomain(v)).toEqual([]);
            expect(isQualifiedName(v)).toEqual([]);
            expect(isValidLabelValue(v)).toEqual([]);
          }
        },
        { seed: 30_329, runs: 1000 },
      );
    },
    TIMEOUT,
  );
});
