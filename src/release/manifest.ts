// A release manifest: the signed description of one fleetlet executable (docs/agent-updates.md).
// The text is UTF-8 with LF line ends, six lines in a fixed order:
//
//   fleetlet-release: 1
//   version: 0.2.0
//   arch: amd64
//   size: 104857600
//   sha256: <64 lowercase hex digits>
//   signature: <base64 of the 64-byte Ed25519 signature of every byte above this line>
//
// Invariants: the parser accepts exactly the text serializeManifest() writes (a final LF after
// the signature line is optional), so the bytes a device verifies are the bytes the operator
// signed; every value it returns passes the checks below; it throws ManifestError only.

/** The architectures fleetlet is released for, by Debian's names. */
export type Arch = "amd64" | "arm64";

export const ARCHES: readonly Arch[] = ["amd64", "arm64"];

/** What a signature covers. */
export interface ReleaseFields {
  /** The release's version: 1 to 64 of [0-9A-Za-z.+-], beginning with a letter or digit. */
  version: string;
  arch: Arch;
  /** The executable's size in bytes (uncompressed), at least 1. */
  size: number;
  /** The executable's sha256, 64 lowercase hex digits. */
  sha256: string;
}

export interface ReleaseManifest extends ReleaseFields {
  /** The 64-byte Ed25519 signature of signedBytes(fields). */
  signature: Uint8Array<ArrayBuffer>;
}

/** The format this code reads and writes (the first line's value). */
const MANIFEST_FORMAT = "1";

/** A malformed manifest; `line` is 1-based (0: the text as a whole). */
export class ManifestError extends Error {
  constructor(
    readonly line: number,
    message: string,
  ) {
    super(line > 0 ? `malformed release manifest, line ${line}: ${message}` : message);
    this.name = "ManifestError";
  }
}

const VERSION = /^[0-9A-Za-z][0-9A-Za-z.+-]{0,63}$/;
const SIZE = /^[1-9][0-9]{0,15}$/;
const SHA256 = /^[0-9a-f]{64}$/;
const SIGNATURE_BYTES = 64;

/** A value quoted for an error message, cut to 40 characters. */
function shown(value: string): string {
  return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
}

/** Why `version` is not a release version, or undefined when it is one. */
export function versionProblem(version: string): string | undefined {
  if (VERSION.test(version)) return undefined;
  return `invalid version ${shown(version)}: want 1 to 64 of [0-9A-Za-z.+-], beginning with a letter or digit`;
}

/** Why `fields` cannot be signed, or undefined when they can. */
function fieldsProblem(fields: ReleaseFields): string | undefined {
  const v = versionProblem(fields.version);
  if (v !== undefined) return v;
  if (!ARCHES.includes(fields.arch)) return `invalid arch ${shown(fields.arch)}`;
  if (!Number.isSafeInteger(fields.size) || fields.size < 1) {
    return `invalid size ${fields.size}: want a whole number of bytes, at least 1`;
  }
  if (!SHA256.test(fields.sha256)) return `invalid sha256 ${shown(fields.sha256)}`;
  return undefined;
}

function unsignedText(f: ReleaseFields): string {
  return `fleetlet-release: ${MANIFEST_FORMAT}\nversion: ${f.version}\narch: ${f.arch}\nsize: ${f.size}\nsha256: ${f.sha256}\n`;
}

/** The bytes a signature covers: every byte of the manifest before its `signature:` line. */
export function signedBytes(fields: ReleaseFields): Uint8Array<ArrayBuffer> {
  const problem = fieldsProblem(fields);
  if (problem !== undefined) throw new ManifestError(0, problem);
  return new TextEncoder().encode(unsignedText(fields));
}

/** The manifest's text, ending with LF. */
export function serializeManifest(m: ReleaseManifest): string {
  if (m.signature.length !== SIGNATURE_BYTES) {
    throw new ManifestError(
      0,
      `a signature has ${SIGNATURE_BYTES} bytes, not ${m.signature.length}`,
    );
  }
  signedBytes(m);
  return `${unsignedText(m)}signature: ${Buffer.from(m.signature).toString("base64")}\n`;
}

const KEYS = ["fleetlet-release", "version", "arch", "size", "sha256", "signature"] as const;
type Key = (typeof KEYS)[number];

/** Splits the text into its six values, by key, checking the lines' form and order. */
function splitLines(text: string): Record<Key, string> {
  const lines = text.split("\n");
  if (lines.length === KEYS.length + 1 && lines[KEYS.length] === "") lines.pop();
  const values: Partial<Record<Key, string>> = {};
  for (const [i, key] of KEYS.entries()) {
    const line = lines[i];
    const n = i + 1;
    if (line === undefined) throw new ManifestError(n, `missing; expected "${key}: …"`);
    if (line.includes("\r"))
      throw new ManifestError(n, "carriage return (the manifest uses LF line ends)");
    if (!line.startsWith(`${key}: `)) {
      throw new ManifestError(n, `expected "${key}: …", found ${shown(line)}`);
    }
    values[key] = line.slice(key.length + 2);
  }
  if (lines.length > KEYS.length) {
    throw new ManifestError(KEYS.length + 1, "text after the signature line");
  }
  return values as Record<Key, string>;
}

function parseSignature(value: string): Uint8Array<ArrayBuffer> {
  const bytes = Buffer.from(value, "base64");
  if (bytes.length !== SIGNATURE_BYTES || bytes.toString("base64") !== value) {
    throw new ManifestError(6, `the signature is not the base64 of ${SIGNATURE_BYTES} bytes`);
  }
  return new Uint8Array(bytes);
}

/** Reads a manifest from its text or its bytes (UTF-8); throws ManifestError naming the line. */
export function parseManifest(input: string | Uint8Array): ReleaseManifest {
  let text: string;
  if (typeof input === "string") text = input;
  else {
    try {
      text = new TextDecoder("utf-8", { fatal: true }).decode(input);
    } catch {
      throw new ManifestError(0, "malformed release manifest: not UTF-8 text");
    }
  }
  const v = splitLines(text);
  if (v["fleetlet-release"] !== MANIFEST_FORMAT) {
    throw new ManifestError(
      1,
      `unsupported format ${shown(v["fleetlet-release"])} (this fleetlet reads ${MANIFEST_FORMAT})`,
    );
  }
  const problem = versionProblem(v.version);
  if (problem !== undefined) throw new ManifestError(2, problem);
  if (!(ARCHES as readonly string[]).includes(v.arch)) {
    throw new ManifestError(3, `unknown arch ${shown(v.arch)}: want ${ARCHES.join(" or ")}`);
  }
  const size = Number(v.size);
  if (!SIZE.test(v.size) || !Number.isSafeInteger(size)) {
    throw new ManifestError(
      4,
      `invalid size ${shown(v.size)}: want a whole number of bytes, at least 1`,
    );
  }
  if (!SHA256.test(v.sha256)) {
    throw new ManifestError(5, `invalid sha256 ${shown(v.sha256)}: want 64 lowercase hex digits`);
  }
  const signature = parseSignature(v.signature);
  return { version: v.version, arch: v.arch as Arch, size, sha256: v.sha256, signature };
}
