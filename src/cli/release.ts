// `fleetlet release keygen|sign|verify`: the operator's side of signed agent updates
// (docs/agent-updates.md). Keys are made and releases signed offline, never by the hub; verify
// checks a manifest, and the executable when given, the way a device does.
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, writeSync } from "node:fs";
import { digestFile } from "../release/digest.ts";
import { archOfExecutable, ElfError } from "../release/elf.ts";
import {
  generateReleaseKeys,
  KeyError,
  type PublicKey,
  parsePublicKey,
  parsePublicKeys,
  readPrivateKey,
  signRelease,
} from "../release/keys.ts";
import { ARCHES, type Arch, versionProblem } from "../release/manifest.ts";
import { checkExecutable, ReleaseCheckError, verifyManifest } from "../release/verify.ts";
import { writeFileAtomic } from "../util/atomic-file.ts";
import { type FlagSpecs, parseArgs } from "./args.ts";
import { CliError, UsageError } from "./errors.ts";
import type { CliIO } from "./io.ts";

export const RELEASE_USAGE = `usage: fleetlet release keygen --out PREFIX
       fleetlet release sign --key PREFIX.key --version V [--arch amd64|arm64] FILE
       fleetlet release verify --public-key PREFIX.pub|ed25519:KEY [--arch A] FILE.sig [FILE]

keygen  writes PREFIX.key (Ed25519 private key, PKCS #8 PEM, mode 0600) and PREFIX.pub
        (ed25519:<base64>); it never overwrites a file.
sign    writes FILE.sig, the release manifest of the executable FILE; the arch defaults to
        FILE's own (its ELF header), and an --arch that contradicts it is refused.
verify  checks the manifest's form and signature (a key file may list several keys, one a
        line), with --arch the manifest's arch, and given FILE, its size and sha256. Exit 0
        and one line when good; exit 1 and one line saying what is wrong.
`;

const flags = {
  out: { type: "string" },
  key: { type: "string" },
  version: { type: "string" },
  arch: { type: "string" },
  "public-key": { type: "string" },
  help: { type: "boolean", short: "h" },
} as const satisfies FlagSpecs;

type ReleaseFlags = ReturnType<typeof parseArgs<typeof flags>>["flags"];

/** Writes a new file (never an existing one) with `mode`, and fsyncs it. */
function writeNewFile(path: string, text: string, mode: number): void {
  let fd: number;
  try {
    fd = openSync(path, "wx", mode);
  } catch (err) {
    const code = (err as { code?: string }).code;
    throw new CliError(
      code === "EEXIST"
        ? `${path} exists: not overwritten`
        : `cannot write ${path}: ${String(err)}`,
    );
  }
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

async function keygen(f: ReleaseFlags, positionals: string[], io: CliIO): Promise<number> {
  if (f.out === undefined || f.out === "" || positionals.length > 0) {
    throw new UsageError(`release keygen takes --out PREFIX only\n${RELEASE_USAGE}`);
  }
  const priv = `${f.out}.key`;
  const pub = `${f.out}.pub`;
  for (const p of [priv, pub])
    if (existsSync(p)) throw new CliError(`${p} exists: not overwritten`);
  const keys = await generateReleaseKeys();
  writeNewFile(priv, keys.privatePem, 0o600);
  writeNewFile(pub, `${keys.publicLine}\n`, 0o644);
  io.stdout(`wrote ${priv} (keep it offline) and ${pub}: ${keys.publicLine}\n`);
  return 0;
}

function readText(path: string, what: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch (err) {
    throw new CliError(`cannot read ${what} ${path}: ${(err as Error).message}`);
  }
}

function parseArch(value: string | undefined): Arch | undefined {
  if (value === undefined) return undefined;
  if (!(ARCHES as readonly string[]).includes(value)) {
    throw new UsageError(`invalid --arch ${JSON.stringify(value)}: want ${ARCHES.join(" or ")}`);
  }
  return value as Arch;
}

async function fileArch(path: string): Promise<Arch> {
  try {
    return await archOfExecutable(path);
  } catch (err) {
    if (err instanceof ElfError) throw new CliError(err.message);
    throw new CliError(`cannot read ${path}: ${(err as Error).message}`);
  }
}

async function sign(f: ReleaseFlags, positionals: string[], io: CliIO): Promise<number> {
  const [file, ...extra] = positionals;
  if (f.key === undefined || f.version === undefined || file === undefined || extra.length > 0) {
    throw new UsageError(`release sign needs --key, --version and one FILE\n${RELEASE_USAGE}`);
  }
  const problem = versionProblem(f.version);
  if (problem !== undefined) throw new UsageError(problem);
  const wanted = parseArch(f.arch);
  const arch = await fileArch(file);
  if (wanted !== undefined && wanted !== arch) {
    throw new CliError(`--arch ${wanted} contradicts ${file}, an ${arch} executable`);
  }
  let key: CryptoKey;
  try {
    key = await readPrivateKey(readText(f.key, "private key"));
  } catch (err) {
    if (err instanceof KeyError) throw new CliError(`${f.key}: ${err.message}`);
    throw err;
  }
  const d = await digestFile(file);
  const { text } = await signRelease(key, { version: f.version, arch, ...d });
  writeFileAtomic(`${file}.sig`, text, { mode: 0o644 });
  io.stdout(`wrote ${file}.sig: ${f.version} ${arch}, ${d.size} bytes, sha256 ${d.sha256}\n`);
  return 0;
}

async function trustedKeys(value: string): Promise<PublicKey[]> {
  try {
    if (value.startsWith("ed25519:")) return [await parsePublicKey(value)];
    const keys = await parsePublicKeys(readText(value, "public key file"));
    if (keys.length === 0) throw new CliError(`${value} holds no public key`);
    return keys;
  } catch (err) {
    if (err instanceof KeyError) throw new CliError(err.message);
    throw err;
  }
}

async function checkFile(file: string, manifest: Parameters<typeof checkExecutable>[0]) {
  await checkExecutable(manifest, file);
  const arch = await fileArch(file);
  if (arch !== manifest.arch) {
    throw new CliError(
      `arch mismatch: ${file} is an ${arch} executable, the manifest says ${manifest.arch}`,
    );
  }
}

async function verify(f: ReleaseFlags, positionals: string[], io: CliIO): Promise<number> {
  const [sig, file, ...extra] = positionals;
  if (f["public-key"] === undefined || sig === undefined || extra.length > 0) {
    throw new UsageError(`release verify needs --public-key and FILE.sig [FILE]\n${RELEASE_USAGE}`);
  }
  const keys = await trustedKeys(f["public-key"]);
  let text: Buffer;
  try {
    text = readFileSync(sig);
  } catch (err) {
    throw new CliError(`cannot read ${sig}: ${(err as Error).message}`);
  }
  try {
    const { manifest, key } = await verifyManifest(text, keys, parseArch(f.arch));
    if (file !== undefined) await checkFile(file, manifest);
    const what = file === undefined ? "manifest" : `${file} and its manifest`;
    io.stdout(
      `good: ${what}, release ${manifest.version} for ${manifest.arch}, ${manifest.size} bytes, signed by ${key.line}\n`,
    );
    return 0;
  } catch (err) {
    if (err instanceof ReleaseCheckError) throw new CliError(`${sig}: ${err.message}`);
    if (typeof (err as { code?: unknown }).code === "string") {
      throw new CliError(`cannot read ${file}: ${(err as Error).message}`);
    }
    throw err;
  }
}

/** `fleetlet release keygen|sign|verify`. */
export async function releaseCommand(argv: string[], io: CliIO): Promise<number> {
  const { flags: f, positionals } = parseArgs(argv, flags);
  const [verb, ...rest] = positionals;
  if (f.help || verb === undefined) {
    io.stdout(RELEASE_USAGE);
    return verb === undefined && !f.help ? 2 : 0;
  }
  if (verb === "keygen") return keygen(f, rest, io);
  if (verb === "sign") return sign(f, rest, io);
  if (verb === "verify") return verify(f, rest, io);
  throw new UsageError(`unknown release command ${JSON.stringify(verb)}\n${RELEASE_USAGE}`);
}
