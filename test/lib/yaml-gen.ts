// Generated YAML texts for checking the fast YAML path against the yaml package: nested maps and
// lists in block and flow style, scalars of every kind YAML resolves, block scalars, comments,
// repeated keys, and random damage (indentation, characters, lines) so that invalid texts come
// up too. Deterministic for a seed.

/** A small seeded PRNG (mulberry32). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const PLAIN = [
  "web",
  "busybox:1.36",
  "1",
  "-1",
  "+1",
  "0.5",
  ".5",
  "1.",
  "1e3",
  "1E-2",
  "0x1f",
  "0o17",
  "017",
  "08",
  "true",
  "True",
  "FALSE",
  "yes",
  "on",
  "y",
  "null",
  "Null",
  "~",
  ".inf",
  "-.Inf",
  ".nan",
  "1_000",
  "12:30",
  "2024-01-01",
  "2024-01-01T10:00:00Z",
  "a b",
  "a:b",
  "a#b",
  "a,b",
  "a]b",
  "a}b",
  "a[b",
  "a{b",
  "http://x/y?z=1&w=2",
  "é",
  "日本",
  "-x",
  "?x",
  ":x",
  "x:",
  "x -",
  "a'b",
  'a"b',
  "*",
  "&x",
  "!x",
  "%x",
  "@x",
  "`x",
  "<<",
  "- x",
  "a: b",
  "a #b",
  "1.0",
  "0",
  "-0",
  "00",
  "0b11",
  "123456789012345678901234567890",
  "3.14159265358979323846",
  "x y z",
  "  ",
  "",
];
const QUOTED = ["a", "", "it's", "a: b", "a #b", "[x]", "{x}", "a, b", "1", "true", "null", "é"];
const KEYS = [
  "name",
  "image",
  "app.kubernetes.io/name",
  "a",
  "b",
  "c",
  "a b",
  "x-y",
  "_z",
  "1",
  "1.0",
  "true",
  "True",
  "null",
  "~",
  "<<",
  "__proto__",
  '"q"',
  "'s'",
  '"a"',
  "'a'",
  '""',
  "-k",
  "k:",
];
const BLOCK_LINES = ["text", "k: v", "- x", "# c", "", "  deeper", "a: b: c", "  - y", "end"];

/** Keys as manifests write them (plain), for texts the fast path mostly takes. */
const TAME_KEYS = ["name", "image", "app.kubernetes.io/name", "a", "b", "c", "x-y", "_z", "ports"];

/** A random YAML text; `tame` keeps to plain keys so that most texts are for the fast path. */
export function generateYaml(rand: () => number, tame = false): string {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;
  const keys = tame ? TAME_KEYS : KEYS;
  const scalar = (): string => {
    const r = rand();
    if (r < 0.6) return pick(PLAIN);
    if (r < 0.8) return `"${pick(QUOTED)}"`;
    return `'${pick(QUOTED).replace(/'/g, "''")}'`;
  };
  const flow = (depth: number): string => {
    if (depth > 2 || rand() < 0.5) return scalar();
    const n = Math.floor(rand() * 3);
    const items = Array.from({ length: n }, () => flow(depth + 1));
    if (rand() < 0.5) return `[${items.join(", ")}]`;
    return `{${Array.from({ length: n }, () => `${pick(keys)}: ${flow(depth + 1)}`).join(", ")}}`;
  };
  const blockScalar = (indent: number): string[] => {
    const header = `${pick(["|", ">"])}${pick(["", "-", "+"])}`;
    const lines = Array.from({ length: 1 + Math.floor(rand() * 3) }, () => pick(BLOCK_LINES));
    return [header, ...lines.map((l) => (l === "" ? "" : " ".repeat(indent) + l))];
  };
  // A node as the value after "key:" or "- " at `indent`: inline text, then the lines below.
  const node = (indent: number, depth: number): { inline: string; below: string[] } => {
    const r = rand();
    if (depth > 3 || r < 0.45) return { inline: scalar(), below: [] };
    if (r < 0.55) return { inline: flow(0), below: [] };
    if (r < 0.65) {
      const [header, ...lines] = blockScalar(indent + 2);
      return { inline: header as string, below: lines };
    }
    const step = pick([2, 2, 4]);
    if (r < 0.85) return { inline: "", below: mapping(indent + step, depth + 1) };
    const seqIndent = rand() < 0.5 ? indent : indent + step;
    return { inline: "", below: sequence(seqIndent, depth + 1) };
  };
  const comment = () => (rand() < 0.1 ? " # note" : "");
  const mapping = (indent: number, depth: number): string[] => {
    const out: string[] = [];
    for (let i = 0; i < 1 + Math.floor(rand() * 4); i++) {
      const { inline, below } = node(indent, depth);
      out.push(`${" ".repeat(indent)}${pick(keys)}:${inline ? ` ${inline}` : ""}${comment()}`);
      out.push(...below);
      if (rand() < 0.05) out.push(`${" ".repeat(indent)}# comment`);
    }
    return out;
  };
  const sequence = (indent: number, depth: number): string[] => {
    const out: string[] = [];
    for (let i = 0; i < 1 + Math.floor(rand() * 3); i++) {
      if (rand() < 0.4) {
        // A compact mapping: "- key: value" and its siblings indented under the key.
        const [first, ...rest] = mapping(indent + 2, depth);
        out.push(`${" ".repeat(indent)}- ${(first as string).trimStart()}`, ...rest);
        continue;
      }
      const { inline, below } = node(indent, depth);
      out.push(`${" ".repeat(indent)}-${inline ? ` ${inline}` : ""}${comment()}`);
      out.push(...below);
    }
    return out;
  };
  const lines = mapping(0, 0);
  if (rand() < 0.3) damage(lines, rand);
  return `${lines.join("\n")}\n`;
}

function damage(lines: string[], rand: () => number): void {
  const i = Math.floor(rand() * lines.length);
  const line = lines[i] ?? "";
  const r = rand();
  if (r < 0.3) lines[i] = rand() < 0.5 ? ` ${line}` : line.replace(/^ {1,2}/, "");
  else if (r < 0.55) {
    const at = Math.floor(rand() * (line.length + 1));
    const ch = ": -#'\"[]{},|>&*!?"[Math.floor(rand() * 18)] ?? " ";
    lines[i] = line.slice(0, at) + ch + line.slice(at);
  } else if (r < 0.75) {
    const at = Math.floor(rand() * line.length);
    lines[i] = line.slice(0, at) + line.slice(at + 1);
  } else if (r < 0.9) lines.splice(i, 0, line);
  else lines.splice(i, 1);
}
