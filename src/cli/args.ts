// A small command-line parser shared by the commands, with pflag's (kubectl's) syntax and
// messages: --flag value, --flag=value, -f value, -fvalue, grouped boolean shorthands (-fp),
// --bool=false, and "--" ending the flags. Every mistake is a UsageError naming the flag.
import { UsageError } from "./errors.ts";

interface FlagSpec {
  type: "string" | "boolean" | "int";
  /** One-letter shorthand, e.g. "n" for -n. */
  short?: string;
}

export type FlagSpecs = Record<string, FlagSpec>;

type FlagValue<S extends FlagSpec> = S["type"] extends "boolean"
  ? boolean
  : S["type"] extends "int"
    ? number
    : string;

export type Flags<T extends FlagSpecs> = { [K in keyof T]?: FlagValue<T[K]> };

export interface ParsedArgs<T extends FlagSpecs> {
  /** Flags as given; the last occurrence wins. */
  flags: Flags<T>;
  /** Arguments that are not flags, in order, before "--". */
  positionals: string[];
  /** Everything after "--", or undefined when there was no "--". */
  rest: string[] | undefined;
}

function convert(spec: FlagSpec, raw: string, shown: string): string | number | boolean {
  if (spec.type === "string") return raw;
  if (spec.type === "int") {
    if (!/^[-+]?\d+$/.test(raw)) {
      throw new UsageError(`invalid argument "${raw}" for "${shown}" flag: not an integer`);
    }
    return Number(raw);
  }
  if (raw === "true" || raw === "1") return true;
  if (raw === "false" || raw === "0") return false;
  throw new UsageError(`invalid argument "${raw}" for "${shown}" flag: want true or false`);
}

/** Parses argv against `specs`; throws UsageError for unknown flags and bad values. */
export function parseArgs<T extends FlagSpecs>(argv: string[], specs: T): ParsedArgs<T> {
  const flags: Record<string, string | number | boolean> = {};
  const positionals: string[] = [];
  const byShort = new Map<string, string>();
  for (const [name, spec] of Object.entries(specs)) if (spec.short) byShort.set(spec.short, name);

  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? "";
    if (arg === "--") return { flags: flags as Flags<T>, positionals, rest: argv.slice(i + 1) };
    if (arg.startsWith("--")) {
      const eq = arg.indexOf("=");
      const name = eq < 0 ? arg.slice(2) : arg.slice(2, eq);
      const spec = specs[name];
      if (spec === undefined) throw new UsageError(`unknown flag: --${name}`);
      if (eq >= 0) flags[name] = convert(spec, arg.slice(eq + 1), `--${name}`);
      else if (spec.type === "boolean") flags[name] = true;
      else {
        const value = argv[++i];
        if (value === undefined) throw new UsageError(`flag needs an argument: --${name}`);
        flags[name] = convert(spec, value, `--${name}`);
      }
    } else if (arg.startsWith("-") && arg.length > 1) {
      i = parseShorts(argv, i, specs, byShort, flags);
    } else {
      positionals.push(arg);
    }
  }
  return { flags: flags as Flags<T>, positionals, rest: undefined };
}

/** Parses the shorthand group at argv[i]; returns the index of the last argument it used. */
function parseShorts(
  argv: string[],
  i: number,
  specs: FlagSpecs,
  byShort: Map<string, string>,
  flags: Record<string, string | number | boolean>,
): number {
  const arg = argv[i] ?? "";
  for (let j = 1; j < arg.length; j++) {
    const letter = arg[j] ?? "";
    const name = byShort.get(letter);
    const spec = name === undefined ? undefined : specs[name];
    if (name === undefined || spec === undefined) {
      throw new UsageError(`unknown shorthand flag: '${letter}' in ${arg}`);
    }
    const shown = `-${letter}`;
    if (arg[j + 1] === "=") {
      flags[name] = convert(spec, arg.slice(j + 2), shown);
      return i;
    }
    if (spec.type === "boolean") {
      flags[name] = true;
      continue;
    }
    if (j + 1 < arg.length) {
      flags[name] = convert(spec, arg.slice(j + 1), shown);
      return i;
    }
    const value = argv[i + 1];
    if (value === undefined) throw new UsageError(`flag needs an argument: '${letter}' in ${arg}`);
    flags[name] = convert(spec, value, shown);
    return i + 1;
  }
  return i;
}
