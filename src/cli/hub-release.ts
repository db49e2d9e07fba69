// `fleetlet hub release push|list|delete`: the hub's store of signed agent releases
// (docs/hub-releases.md). The operator signs offline (`fleetlet release sign`); push uploads the
// executable and its manifest, streamed from disk; the hub checks size and sha256, not the key.
import { readFileSync, statSync } from "node:fs";
import type { ReleaseInfo } from "../hub/releases/store.ts";
import { RELEASE_MANIFEST_HEADER, RELEASES_PATH } from "../protocol/index.ts";
import { digestFile } from "../release/digest.ts";
import { ManifestError, parseManifest, type ReleaseFields } from "../release/manifest.ts";
import { type FlagSpecs, parseArgs } from "./args.ts";
import { CliError, UsageError } from "./errors.ts";
import { type HubTarget, hubRequest, hubSend, hubTarget } from "./hub-client.ts";
import type { CliIO } from "./io.ts";
import { age, parseOutputFormat, printObjects } from "./printers.ts";
import { alignTabs, TABLE } from "./tabwriter.ts";

const HUB_RELEASE_USAGE = `usage: fleetlet hub release push FILE --signature FILE.sig --hub URL [--token T] [--ca-file F]
       fleetlet hub release list --hub URL [--token T] [-o json|yaml]
       fleetlet hub release delete VERSION [--arch amd64|arm64] --hub URL [--token T]
push uploads a release signed with \`fleetlet release sign\`; the hub keeps it gzip-compressed and
serves it to devices. The same bytes again change nothing; other bytes under a stored version and
arch are refused.
`;

const flags = {
  hub: { type: "string" },
  token: { type: "string" },
  "ca-file": { type: "string" },
  signature: { type: "string" },
  arch: { type: "string" },
  output: { type: "string", short: "o" },
  help: { type: "boolean", short: "h" },
} as const satisfies FlagSpecs;

/** The longest a push may take: the upload and the hub's compression of ~100 MB. */
const PUSH_TIMEOUT_MS = 30 * 60_000;

function readManifest(path: string): { text: string; fields: ReleaseFields } {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new CliError(`cannot read the signature ${path}: ${(err as Error).message}`);
  }
  try {
    return { text, fields: parseManifest(text) };
  } catch (err) {
    if (err instanceof ManifestError) throw new CliError(`${path}: ${err.message}`);
    throw err;
  }
}

/** The manifest the hub stores for the release, or undefined when it has none. */
async function storedManifest(target: HubTarget, f: ReleaseFields): Promise<string | undefined> {
  let res: Response;
  try {
    res = await fetch(`${target.url}${releasePath(f.version, f.arch)}/manifest`, {
      headers: { authorization: `Bearer ${target.token}` },
      ...((target.ca === undefined ? {} : { tls: { ca: target.ca } }) as RequestInit),
      signal: AbortSignal.timeout(30_000),
    });
  } catch (err) {
    throw new CliError(`Cannot reach the hub at ${target.url}: ${(err as Error).message}`);
  }
  const text = await res.text();
  if (res.status === 404) return undefined;
  if (!res.ok)
    throw new CliError(`the hub refused to say which releases it has: HTTP ${res.status}`);
  return text;
}

function releasePath(version: string, arch: string): string {
  return `${RELEASES_PATH}/${encodeURIComponent(version)}/${encodeURIComponent(arch)}`;
}

async function push(argv: string[], io: CliIO): Promise<number> {
  const { flags: f, positionals } = parseArgs(argv, flags);
  const [file, ...extra] = positionals;
  if (file === undefined || extra.length > 0)
    throw new UsageError(`hub release push takes one executable\n${HUB_RELEASE_USAGE}`);
  const sigPath = f.signature ?? `${file}.sig`;
  const { text, fields } = readManifest(sigPath);
  const size = statSync(file, { throwIfNoEntry: false })?.size;
  if (size === undefined) throw new CliError(`cannot read ${file}: no such file`);
  if (size !== fields.size)
    throw new CliError(`${file} has ${size} bytes, its manifest ${sigPath} says ${fields.size}`);
  const target = hubTarget(f, io);
  const name = `${fields.version}/${fields.arch}`;
  const { sha256 } = await digestFile(file);
  if (sha256 !== fields.sha256)
    throw new CliError(
      `${file} has sha256 ${sha256}, its manifest ${sigPath} says ${fields.sha256}`,
    );
  const stored = await storedManifest(target, fields);
  if (stored !== undefined) {
    const had = parseManifest(stored);
    if (had.sha256 !== fields.sha256)
      throw new CliError(
        `the hub already has release ${name} with other bytes (sha256 ${had.sha256.slice(0, 12)}…): give the new build a new version, or delete the stored one first`,
      );
    io.stdout(`release ${name} unchanged: the hub already has these bytes\n`);
    return 0;
  }
  const res = await hubSend<{ stored: boolean; release: ReleaseInfo }>(
    target,
    "PUT",
    releasePath(fields.version, fields.arch),
    {
      headers: {
        "content-type": "application/octet-stream",
        [RELEASE_MANIFEST_HEADER]: Buffer.from(text, "utf8").toString("base64"),
      },
      body: Bun.file(file),
      signal: AbortSignal.timeout(PUSH_TIMEOUT_MS),
    },
  );
  const r = res.body.release;
  io.stdout(
    res.body.stored
      ? `release ${name} pushed: ${r.size} bytes, ${r.compressedSize} compressed, sha256 ${r.sha256.slice(0, 12)}\n`
      : `release ${name} unchanged: the hub already has these bytes (pushed ${r.pushedAt})\n`,
  );
  return 0;
}

/** 110610608 → "105.5Mi". */
function mebibytes(n: number): string {
  return `${(n / 1048576).toFixed(1)}Mi`;
}

/** The release table: VERSION ARCH SIZE COMPRESSED SHA256 PUSHED. */
function printReleaseTable(items: ReleaseInfo[], now: number): string {
  const rows = items.map((r) =>
    [
      r.version,
      r.arch,
      mebibytes(r.size),
      mebibytes(r.compressedSize),
      r.sha256.slice(0, 12),
      `${age(r.pushedAt, now)} ago`,
    ].join("\t"),
  );
  const header = ["VERSION", "ARCH", "SIZE", "COMPRESSED", "SHA256", "PUSHED"].join("\t");
  return alignTabs([header, ...rows].map((r) => `${r}\n`).join(""), TABLE);
}

async function list(argv: string[], io: CliIO): Promise<number> {
  const { flags: f, positionals } = parseArgs(argv, flags);
  if (positionals.length > 0) throw new UsageError(`hub release list takes no arguments`);
  const format = parseOutputFormat(f.output);
  const { items } = await hubRequest<{ items: ReleaseInfo[] }>(
    hubTarget(f, io),
    "GET",
    RELEASES_PATH,
  );
  if (format === "json" || format === "yaml") io.stdout(printObjects(items, format));
  else if (items.length === 0) io.stderr("No releases found\n");
  else io.stdout(printReleaseTable(items, io.now()));
  return 0;
}

async function remove(argv: string[], io: CliIO): Promise<number> {
  const { flags: f, positionals } = parseArgs(argv, flags);
  const [version, ...extra] = positionals;
  if (version === undefined || extra.length > 0)
    throw new UsageError(`hub release delete takes one version\n${HUB_RELEASE_USAGE}`);
  const path = `${RELEASES_PATH}/${encodeURIComponent(version)}${f.arch === undefined ? "" : `/${encodeURIComponent(f.arch)}`}`;
  const r = await hubRequest<{ deleted: string[] }>(hubTarget(f, io), "DELETE", path);
  for (const d of r.deleted) io.stdout(`release ${d} deleted\n`);
  return 0;
}

/** `fleetlet hub release push|list|delete`. */
export function hubReleaseCommand(argv: string[], io: CliIO): Promise<number> {
  const [verb, ...rest] = argv;
  if (verb === "push") return push(rest, io);
  if (verb === "list") return list(rest, io);
  if (verb === "delete") return remove(rest, io);
  if (verb === undefined || verb === "--help" || verb === "-h") {
    io.stdout(HUB_RELEASE_USAGE);
    return Promise.resolve(0);
  }
  throw new UsageError(`unknown hub release command ${JSON.stringify(verb)}\n${HUB_RELEASE_USAGE}`);
}
