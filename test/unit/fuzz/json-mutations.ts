// Near-valid JSON for properties: a valid value with a few mutations at paths picked among its
// own (a field removed, retyped, made huge, nested deeply, widened, given an odd number, or an
// unknown field added), and text that is not JSON at all. Shared by the hub's property files.
import fc from "fast-check";

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Path = (string | number)[];

const OPS = ["remove", "retype", "huge", "deep", "wide", "number", "unknown", "proto"] as const;

/** One mutation: `at` picks the path (modulo how many there are), `op` what is done there. */
interface Mutation {
  at: number;
  op: (typeof OPS)[number];
  value: Json;
  n: number;
  size: number;
}

const oddNumbers = [-1, 0, 0.5, -0.0, 1e308, -1e308, 2 ** 31, 2 ** 53 + 2, 4294967296, 1e-7];

const mutationArb: fc.Arbitrary<Mutation> = fc.record({
  at: fc.nat(),
  op: fc.constantFrom(...OPS),
  value: fc.jsonValue({ maxDepth: 3 }) as fc.Arbitrary<Json>,
  n: fc.constantFrom(...oddNumbers),
  size: fc.constantFrom(10_000, 70_000, 300_000),
});

/** Every path inside `v` (not the root itself). */
function pathsOf(v: Json, prefix: Path = [], out: Path[] = []): Path[] {
  if (Array.isArray(v))
    v.forEach((x, i) => {
      out.push([...prefix, i]);
      pathsOf(x, [...prefix, i], out);
    });
  else if (v !== null && typeof v === "object")
    for (const [k, x] of Object.entries(v)) {
      out.push([...prefix, k]);
      pathsOf(x, [...prefix, k], out);
    }
  return out;
}

function nest(v: Json, depth: number, asObject: boolean): Json {
  let out = v;
  for (let i = 0; i < depth; i++) out = asObject ? { a: out } : [out];
  return out;
}

function replacement(m: Mutation, old: Json): Json | undefined {
  switch (m.op) {
    case "remove":
      return undefined;
    case "retype":
      return m.value;
    case "huge":
      return typeof old === "string" || m.n > 0 ? "x".repeat(m.size) : Array(m.size / 10).fill(0);
    case "deep":
      return nest(old, 2000, m.n > 0);
    case "wide":
      return Array.from({ length: 2000 }, () => old);
    case "number":
      return m.n;
    default:
      return old;
  }
}

function apply(root: Json, m: Mutation): Json {
  const paths = pathsOf(root);
  const path = paths[m.at % Math.max(1, paths.length)] ?? [];
  if (path.length === 0) return m.op === "retype" ? m.value : root;
  let parent = root as Record<string | number, Json>;
  for (const k of path.slice(0, -1)) parent = parent[k] as Record<string | number, Json>;
  const last = path.at(-1) as string | number;
  if (m.op === "unknown" || m.op === "proto") {
    const target = parent[last];
    const key = m.op === "proto" ? "__proto__" : "zzUnknownField";
    if (target !== null && typeof target === "object" && !Array.isArray(target))
      Object.defineProperty(target, key, {
        value: m.value,
        enumerable: true,
        writable: true,
        configurable: true,
      });
    return root;
  }
  const next = replacement(m, parent[last] ?? null);
  if (next !== undefined) parent[last] = next;
  else if (Array.isArray(parent)) parent.splice(last as number, 1);
  else delete parent[last];
  return root;
}

const GROWING = new Set<Mutation["op"]>(["huge", "deep", "wide"]);

/** `valid` with `mutations` applied in turn (on a copy); of those that make a value big, only the
 * first, applied last (two would multiply each other's size past any limit worth testing). */
function mutate(valid: Json, mutations: Mutation[]): Json {
  const growing = mutations.find((m) => GROWING.has(m.op));
  const ordered = [...mutations.filter((m) => !GROWING.has(m.op)), ...(growing ? [growing] : [])];
  return ordered.reduce(apply, structuredClone(valid));
}

/** A valid value of `valids`, mutated 0 to 3 times, as JSON text. */
export function nearValidText(valids: fc.Arbitrary<Json>): fc.Arbitrary<string> {
  return fc
    .tuple(valids, fc.array(mutationArb, { maxLength: 3 }))
    .map(([v, ms]) => JSON.stringify(mutate(v, ms)));
}

/** Text that is mostly not JSON: random, cut JSON, deep brackets, lone surrogates, NULs. */
export function brokenText(valids: fc.Arbitrary<Json>): fc.Arbitrary<string> {
  return fc.oneof(
    fc.string({ maxLength: 200 }),
    fc.string({ unit: "binary", maxLength: 200 }),
    valids
      .map((v) => JSON.stringify(v))
      .chain((t) => fc.nat({ max: t.length }).map((n) => t.slice(0, n))),
    fc.constantFrom(
      "[".repeat(100_000),
      `${'{"a":'.repeat(50_000)}1${"}".repeat(50_000)}`,
      '{"type":"hb"',
      '{"type":"\uD800"}',
      '{"type":"hello"}\u0000',
      "null",
      "[]",
      '"hello"',
      "1e999",
      '{"type":null}',
      '{"type":{"toString":1}}',
      '{"__proto__":{"type":"hb"}}',
    ),
    fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)),
  );
}
