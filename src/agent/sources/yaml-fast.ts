// Reading a manifest's YAML fast. Bun's own parser reads a typical manifest about 30 times faster
// than the yaml package on a cold start, which is what a burst of new manifests meets (30 pods:
// ~1 ms against ~35 ms). It reads some YAML differently from the yaml package, which stays the
// reference: a key given twice (the last wins instead of an error), merge keys, tags, null keys,
// anchors (no alias limit), several documents. So it reads only what plainPairs() accepts: one
// document of block YAML whose quoted scalars and flow collections each stay on one line, with
// none of those features, plain keys that are names, numbers only in YAML 1.2's core forms, and
// no tabs, control characters or backslashes; and its result must hold exactly one key for each
// key/value pair plainPairs() counted in the text, so no key was lost to a duplicate. Anything
// else returns undefined, for the yaml package (and its error messages with line and column).
//
// Soundness rests on plainPairs() never counting fewer pairs than the text has: a line it
// cannot read with certainty makes it give up. test/unit/sources/yaml-fast.test.ts checks the two
// parsers agree on every generated text the fast path takes.

/** Whether the text has a character never in a fast-path text: a tab, CR or other control
 * character, a backslash (escapes), a Unicode line break, a byte order mark. */
function hasForbiddenChar(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x20 ? c !== 0x0a : c === 0x5c || (c >= 0x7f && c <= 0x9f)) return true;
    if (c === 0x2028 || c === 0x2029 || c === 0xfeff) return true;
  }
  return false;
}
/** Characters that start an anchor, alias, tag, directive or reserved token. */
const NODE_PROPERTY = new Set(["&", "*", "!", "%", "@", "`"]);
/** Keys whose reading differs (null keys, merge keys) or is unsafe (`__proto__`). */
const SPECIAL_KEY = /^(|~|null|Null|NULL|<<)$|__proto__/;

/** The value of `text` as the yaml package reads it, when the fast path can read it. */
export function readPlainYaml(text: string): { value: unknown } | undefined {
  const pairs = plainPairs(text);
  if (pairs === undefined) return undefined;
  let value: unknown;
  try {
    value = Bun.YAML.parse(text);
  } catch {
    return undefined;
  }
  if (value !== null && !isPlainObject(value)) return undefined;
  return countKeys(value) === pairs ? { value } : undefined;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && Object.getPrototypeOf(v) === Object.prototype;
}

/** Keys of every mapping in `v`; NaN when one is special or an object is not a plain one. */
function countKeys(v: unknown): number {
  if (Array.isArray(v)) return v.reduce((n: number, x) => n + countKeys(x), 0);
  if (typeof v !== "object" || v === null) return 0;
  if (!isPlainObject(v)) return Number.NaN;
  let n = 0;
  for (const [k, x] of Object.entries(v)) {
    if (SPECIAL_KEY.test(k)) return Number.NaN;
    n += 1 + countKeys(x);
  }
  return n;
}

/** Thrown inside the scanner when the text is not for the fast path. */
class NotPlain extends Error {}
function notPlain(): never {
  throw new NotPlain();
}

/** The number of key/value pairs in a plain text, or undefined when it is not plain. */
export function plainPairs(text: string): number | undefined {
  if (hasForbiddenChar(text)) return undefined;
  try {
    return new LineScanner().scan(text);
  } catch (err) {
    if (err instanceof NotPlain) return undefined;
    throw err;
  }
}

/** A plain key: a name as manifests write them, not one YAML would read as a bool or null. */
const PLAIN_KEY = /^[A-Za-z_][A-Za-z0-9_./-]*$/;
const KEYWORD = /^(true|True|TRUE|false|False|FALSE|null|Null|NULL)$/;

/** A plain scalar that may be a number must be one of YAML 1.2's core schema, which both parsers
 * read alike (Bun also reads forms such as "-0o17" as numbers), and not an integer with a
 * leading zero: manifests read those as octal (a file mode written "0644"), as Kubernetes does. */
const NUMBER_LIKE = /^[-+]?[.0-9][0-9a-zA-Z.+-]*$/;
const CORE_NUMBER =
  /^([-+]?(0|[1-9][0-9]*)|0o[0-7]+|0x[0-9a-fA-F]+|[-+]?(\.[0-9]+|[0-9]+\.[0-9]*|0|[1-9][0-9]*)([eE][-+]?[0-9]+)?|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN))$/;

/** What node() read: a scalar's text (with whether it was quoted), a flow collection, or a
 * block scalar header. */
type Node =
  | { kind: "scalar"; text: string; quoted: boolean }
  | { kind: "flow" }
  | { kind: "block" };

class LineScanner {
  private pairs = 0;
  /** Inside a block scalar: its owner's column, and its content's indentation once known. */
  private block: { owner: number; indent?: number } | undefined;
  private line = "";
  private pos = 0;

  scan(text: string): number {
    for (const line of text.split("\n")) this.scanLine(line);
    return this.pairs;
  }

  private scanLine(line: string): void {
    let indent = 0;
    while (line[indent] === " ") indent++;
    if (this.block !== undefined) {
      if (indent === line.length) return;
      if (indent > this.block.owner) {
        this.block.indent ??= indent;
        if (indent < this.block.indent) notPlain();
        return;
      }
      this.block = undefined;
    }
    if (indent === line.length || line[indent] === "#") return;
    if (/^(---|\.\.\.)/.test(line)) notPlain();
    this.line = line;
    this.pos = indent;
    // Sequence entries ("- ") before a node; the last one's column owns a block scalar here.
    let owner = -1;
    while (this.at("-") && (this.pos + 1 === line.length || line[this.pos + 1] === " ")) {
      owner = this.pos;
      this.pos++;
      this.skipSpaces();
    }
    if (this.pos === line.length) return;
    const keyColumn = this.pos;
    const first = this.node(0);
    if (first.kind === "block") {
      // A block scalar header alone on a line (its owner on the line above) is not plain.
      if (owner < 0) notPlain();
      this.openBlock(owner);
    } else if (this.pair(first, 0) && !this.atEnd()) {
      const value = this.node(0);
      if (value.kind === "block") this.openBlock(keyColumn);
      else {
        // A second pair on the line (`a: b: c`) is not plain.
        this.skipSpaces();
        if (this.at(":")) notPlain();
        this.endOfLine();
      }
    } else this.endOfLine();
  }

  /** Only spaces and a comment may follow. */
  private endOfLine(): void {
    this.skipSpaces();
    if (this.pos === this.line.length) return;
    if (this.at("#") && this.line[this.pos - 1] === " ") {
      this.pos = this.line.length;
      return;
    }
    notPlain();
  }

  /** A block scalar header (`|`, `>-`, ...) was read; its content lines follow. */
  private openBlock(owner: number): void {
    this.endOfLine();
    this.block = { owner };
  }

  /** Whether only spaces or a comment are left on the line. */
  private atEnd(): boolean {
    this.skipSpaces();
    return this.pos === this.line.length || this.at("#");
  }

  /** Reads one node at pos (in a flow collection when depth > 0); throws on anything that is
   * not plain. */
  private node(depth: number): Node {
    const c = this.line[this.pos];
    if (c === undefined || NODE_PROPERTY.has(c)) notPlain();
    if (c === "?" || c === ":" || c === "-") {
      const next = this.line[this.pos + 1];
      if (next === undefined || next === " " || (depth > 0 && c !== "-")) notPlain();
    }
    if (c === '"' || c === "'") return { kind: "scalar", text: this.quoted(c), quoted: true };
    if (c === "[" || c === "{") {
      this.flow(depth + 1);
      return { kind: "flow" };
    }
    if (c === "|" || c === ">") {
      if (depth > 0) notPlain();
      this.pos++;
      if (this.at("+") || this.at("-")) this.pos++;
      return { kind: "block" };
    }
    if (c === "#" || c === "," || c === "]" || c === "}") notPlain();
    return { kind: "scalar", text: this.plain(depth), quoted: false };
  }

  /** A quoted scalar that ends on this line; returns its text. */
  private quoted(q: string): string {
    const start = ++this.pos;
    for (;;) {
      const end = this.line.indexOf(q, this.pos);
      if (end < 0) notPlain();
      if (q === "'" && this.line[end + 1] === "'") {
        this.pos = end + 2;
        continue;
      }
      this.pos = end + 1;
      return this.line.slice(start, end);
    }
  }

  /** A plain scalar: up to a pair indicator, a comment, or (in flow) a flow indicator. */
  private plain(depth: number): string {
    const start = this.pos;
    const line = this.line;
    while (this.pos < line.length) {
      const c = line[this.pos] as string;
      const next = line[this.pos + 1];
      if (c === ":" && (next === undefined || next === " ")) break;
      if (c === " " && next === "#") break;
      if (depth > 0 && (c === "," || c === "]" || c === "}" || c === "[" || c === "{")) break;
      if (depth > 0 && c === ":" && (next === "," || next === "]" || next === "}")) break;
      this.pos++;
    }
    const text = line.slice(start, this.pos).trimEnd();
    if (NUMBER_LIKE.test(text) && !CORE_NUMBER.test(text)) notPlain();
    return text;
  }

  /** Whether a pair indicator follows the node just read; counts the pair and steps over it. */
  private pair(key: Node, depth: number): boolean {
    const end = this.pos;
    this.skipSpaces();
    if (!this.at(":")) return false;
    const next = this.line[this.pos + 1];
    const adjacent = key.kind === "scalar" && key.quoted && end === this.pos && depth > 0;
    const indicator =
      next === undefined ||
      next === " " ||
      (depth > 0 && (next === "," || next === "]" || next === "}")) ||
      adjacent;
    if (!indicator) return false;
    this.pos++;
    this.countKey(key);
    return true;
  }

  /** Counts a key; a collection, or a key that YAML resolves to a bool or null, is not plain. */
  private countKey(key: Node): void {
    if (key.kind !== "scalar") notPlain();
    if (
      key.quoted ? SPECIAL_KEY.test(key.text) : !PLAIN_KEY.test(key.text) || KEYWORD.test(key.text)
    )
      notPlain();
    this.pairs++;
  }

  /** A flow collection at pos that closes on this line, counting its pairs; a trailing comma
   * or an empty entry is not plain. */
  private flow(depth: number): void {
    const close = this.at("[") ? "]" : "}";
    this.pos++;
    this.skipSpaces();
    if (this.at(close)) {
      this.pos++;
      return;
    }
    for (;;) {
      this.skipSpaces();
      const key = this.node(depth);
      if (this.pair(key, depth)) {
        this.skipSpaces();
        if (!this.at(",") && !this.at(close)) this.node(depth);
      } else if (close === "}") {
        // A flow mapping's entry without a value (`{a, b}`) is a key too.
        this.countKey(key);
      }
      this.skipSpaces();
      if (this.at(":")) notPlain();
      if (this.at(close)) {
        this.pos++;
        return;
      }
      if (!this.at(",")) notPlain();
      this.pos++;
      this.skipSpaces();
      if (this.at(close)) notPlain();
    }
  }

  private at(c: string): boolean {
    return this.line[this.pos] === c;
  }

  private skipSpaces(): void {
    while (this.line[this.pos] === " ") this.pos++;
  }
}
