// D-Bus types and signatures: a signature is parsed into a tree of types, checked against the
// specification's rules (at most 255 characters, at most 32 nested arrays and 32 nested structs,
// dict entries only as array elements with a basic key, no empty struct). The file descriptor
// type "h" is not supported: nothing here passes file descriptors.
//
// Values in JavaScript: y n q i u d → number, x t → bigint, b → boolean, s o g → string,
// a → an array of element values, a dict (a{kv}) → an array of [key, value] pairs in wire order,
// a struct → an array of its fields, v → a Variant (its signature and value).

/** A signature, value or message that breaks the D-Bus rules, found while reading bytes from a
 * peer; the message says what and where. Every failure of the decoder is of this class. */
export class DBusDecodeError extends Error {
  override name = "DBusDecodeError";
}

/** A value that does not fit its signature, found while writing. */
export class DBusEncodeError extends Error {
  override name = "DBusEncodeError";
}

type BasicCode = "y" | "b" | "n" | "q" | "i" | "u" | "x" | "t" | "d" | "s" | "o" | "g";

export type DType =
  | { code: BasicCode }
  | { code: "v" }
  | { code: "a"; elem: DType }
  | { code: "("; fields: DType[] }
  | { code: "{"; key: DType; value: DType };

/** A value of type v: the signature of one complete type and a value of that type. */
export class Variant {
  constructor(
    /** One complete type, e.g. "s", "as", "a(sv)". */
    readonly signature: string,
    readonly value: DBusValue,
  ) {}
}

export type DBusValue = number | bigint | boolean | string | Variant | DBusValue[];

/** Longest signature the specification allows. */
const MAX_SIGNATURE_LENGTH = 255;
/** Most arrays (and, separately, structs and dict entries) nested in one another. */
const MAX_NESTING = 32;
/** Most containers of any kind, variants included, nested while reading one value. */
export const MAX_TOTAL_DEPTH = 64;

const BASIC = new Set<string>(["y", "b", "n", "q", "i", "u", "x", "t", "d", "s", "o", "g"]);

/** Byte alignment of each type's first byte. */
export function alignment(t: DType): number {
  switch (t.code) {
    case "y":
    case "g":
    case "v":
      return 1;
    case "n":
    case "q":
      return 2;
    case "x":
    case "t":
    case "d":
    case "(":
    case "{":
      return 8;
    default:
      return 4;
  }
}

/** The signature of one type. */
export function signatureOf(t: DType): string {
  switch (t.code) {
    case "a":
      return `a${signatureOf(t.elem)}`;
    case "(":
      return `(${t.fields.map(signatureOf).join("")})`;
    case "{":
      return `{${signatureOf(t.key)}${signatureOf(t.value)}}`;
    default:
      return t.code;
  }
}

type Fail = (why: string) => never;

/** Reads types from one signature, keeping the nesting counts. */
class SignatureParser {
  pos = 0;
  arrays = 0;
  structs = 0;

  constructor(
    readonly sig: string,
    readonly fail: Fail,
  ) {}

  one(inArray: boolean): DType {
    const c = this.sig[this.pos];
    if (c === undefined) return this.fail("ends inside a type");
    this.pos++;
    if (BASIC.has(c)) return { code: c as BasicCode };
    if (c === "v") return { code: "v" };
    if (c === "a") return this.array();
    if (c === "(") return this.struct();
    if (c === "{" && inArray) return this.dictEntry();
    if (c === "{") return this.fail("has a dict entry outside an array");
    return this.fail(`has ${JSON.stringify(c)} at ${this.pos - 1}`);
  }

  private array(): DType {
    if (++this.arrays > MAX_NESTING) this.fail(`nests more than ${MAX_NESTING} arrays`);
    const elem = this.one(true);
    this.arrays--;
    return { code: "a", elem };
  }

  private struct(): DType {
    if (++this.structs > MAX_NESTING) this.fail(`nests more than ${MAX_NESTING} structs`);
    const fields: DType[] = [];
    while (this.sig[this.pos] !== ")") {
      if (this.pos >= this.sig.length) this.fail("has an unclosed struct");
      fields.push(this.one(false));
    }
    this.pos++;
    if (fields.length === 0) this.fail("has an empty struct");
    this.structs--;
    return { code: "(", fields };
  }

  private dictEntry(): DType {
    if (++this.structs > MAX_NESTING) this.fail(`nests more than ${MAX_NESTING} structs`);
    const key = this.one(false);
    if (!BASIC.has(key.code)) this.fail(`has a dict key of type ${signatureOf(key)}`);
    const value = this.one(false);
    if (this.sig[this.pos] !== "}") this.fail("has a dict entry of other than two types");
    this.pos++;
    this.structs--;
    return { code: "{", key, value };
  }
}

function parse(sig: string, fail: Fail): DType[] {
  if (sig.length > MAX_SIGNATURE_LENGTH) fail(`is longer than ${MAX_SIGNATURE_LENGTH}`);
  const p = new SignatureParser(sig, fail);
  const types: DType[] = [];
  while (p.pos < sig.length) types.push(p.one(false));
  return types;
}

const cache = new Map<string, DType[]>();

function cached(sig: string, fail: Fail): DType[] {
  let types = cache.get(sig);
  if (types === undefined) {
    types = parse(sig, fail);
    if (cache.size >= 512) cache.clear();
    cache.set(sig, types);
  }
  return types;
}

/** The types of a signature written by this program; throws DBusEncodeError if invalid. */
export function parseSignature(sig: string): DType[] {
  return cached(sig, (why) => {
    throw new DBusEncodeError(`signature ${JSON.stringify(sig)} ${why}`);
  });
}

/** The types of a signature read from a peer; throws DBusDecodeError if invalid. */
export function parseSignatureFromPeer(sig: string): DType[] {
  return cached(sig, (why) => {
    throw new DBusDecodeError(`signature ${JSON.stringify(sig)} ${why}`);
  });
}

/** The one complete type of a variant's signature, or null if it is not exactly one. */
export function singleType(types: DType[]): DType | null {
  return types.length === 1 ? (types[0] ?? null) : null;
}

const OBJECT_PATH = /^\/$|^(\/[A-Za-z0-9_]+)+$/;

/** Whether `s` is a valid object path ("/" or "/a/b_c", no empty or trailing element). */
export function isObjectPath(s: string): boolean {
  return OBJECT_PATH.test(s);
}
