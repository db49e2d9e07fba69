// What every release store shares (docs/hub-releases.md): the checks of a push's version, arch
// and manifest, the upload streamed to a temp file and checked against its manifest, its gzip
// compression, and the refusals they give.
import { randomBytes } from "node:crypto";
import { createReadStream, createWriteStream, mkdirSync, rmSync } from "node:fs";
import { open, rm } from "node:fs/promises";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { createGzip } from "node:zlib";
import { StatusError } from "../../api/status.ts";
import { digestFile } from "../../release/digest.ts";
import {
  ARCHES,
  type Arch,
  ManifestError,
  parseManifest,
  type ReleaseFields,
  versionProblem,
} from "../../release/manifest.ts";
import { errorCode } from "../../util/atomic-file.ts";
import type { PushOutcome, ReleaseInfo } from "./store.ts";

/** gzip level of stored releases: on a 110 MB fleetlet, 9 gives 51.4 MB in 6.9 s on this
 * machine's core, 6 gives 52.7 MB in 2.7 s, 1 gives 64.2 MB in 1.2 s. A push is compressed once
 * and downloaded by every device, often over metered links: the smallest wins. */
const GZIP_LEVEL = 9;

/** The pushed executable: a request (or a response) whose body is streamed to disk. */
export type Upload = Request | Response;

export const rfc3339 = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");

/** The arch if `arch` is one, else a BadRequest naming it. */
export function checkArch(arch: string): Arch {
  if ((ARCHES as readonly string[]).includes(arch)) return arch as Arch;
  throw new StatusError("BadRequest", `unknown arch ${JSON.stringify(arch)}: want amd64 or arm64`);
}

/** The version if it is one, else a BadRequest. */
export function checkVersion(version: string): string {
  const problem = versionProblem(version);
  if (problem !== undefined) throw new StatusError("BadRequest", problem);
  return version;
}

/** Whether `version`/`arch` can name a release (else none is stored under it). */
export function isReleaseName(version: string, arch: string): boolean {
  return versionProblem(version) === undefined && (ARCHES as readonly string[]).includes(arch);
}

/** The fields of a pushed manifest, checked to be of release `version`/`arch`. */
function parsePushed(text: string, version: string, arch: string): ReleaseFields {
  let fields: ReleaseFields;
  try {
    fields = parseManifest(text);
  } catch (err) {
    if (err instanceof ManifestError) throw new StatusError("BadRequest", err.message);
    throw err;
  }
  if (fields.version !== version || fields.arch !== arch)
    throw new StatusError(
      "BadRequest",
      `the manifest is of release ${fields.version}/${fields.arch}, pushed as ${version}/${arch}`,
    );
  return fields;
}

function tooLarge(size: number, maxBytes: number): StatusError {
  return new StatusError(
    "RequestEntityTooLarge",
    `the release is ${size} bytes, over the hub's limit of ${maxBytes} bytes`,
  );
}

/**
 * Writes `body` to `path` (Bun streams it to disk natively: a few MB of memory, where reading
 * the body's chunks in JS lets a fast client fill ~40 MB of the hub's memory), then checks its
 * size and sha256 against `want`, reading the file back in chunks.
 */
async function receive(
  body: Upload,
  path: string,
  want: ReleaseFields,
  maxBytes: number,
): Promise<void> {
  await Bun.write(path, body);
  const got = await digestFile(path);
  if (got.size > maxBytes) throw tooLarge(got.size, maxBytes);
  if (got.size !== want.size)
    throw new StatusError(
      "BadRequest",
      `size mismatch: the upload has ${got.size} bytes, the manifest says ${want.size}`,
    );
  if (got.sha256 !== want.sha256)
    throw new StatusError(
      "BadRequest",
      `sha256 mismatch: the upload has ${got.sha256}, the manifest says ${want.sha256}`,
    );
}

/** Compresses the file `bin` into `gz`, fsynced. */
export async function compress(bin: string, gz: string): Promise<void> {
  await pipeline(
    // 64 KiB reads: 1 MiB ones cost ~10 MB more of the hub's peak memory for no speed.
    createReadStream(bin, { highWaterMark: 65_536 }),
    createGzip({ level: GZIP_LEVEL }),
    createWriteStream(gz, { mode: 0o644 }),
  );
  await fsyncPath(gz);
}

/** A full disk (ENOSPC, EDQUOT) as a 507 naming the release; other errors as they are. */
function diskFull(err: unknown, key: string): unknown {
  const code = errorCode(err);
  if (code !== "ENOSPC" && code !== "EDQUOT") return err;
  return new StatusError(
    "InsufficientStorage",
    `the hub's disk is full: release ${key} is not stored (${(err as Error).message})`,
  );
}

export function conflict(key: string, existing: ReleaseInfo): StatusError {
  return new StatusError(
    "Conflict",
    `release ${key} is already stored with other bytes (sha256 ${existing.sha256.slice(0, 12)}…, ${existing.size} bytes, pushed ${existing.pushedAt}): give the new build a new version, or delete the stored one first`,
  );
}

/** fsync of a file or folder (a folder where the platform allows it). */
export async function fsyncPath(path: string): Promise<void> {
  const fd = await open(path, "r");
  try {
    await fd.sync().catch(() => {});
  } finally {
    await fd.close();
  }
}

/** Where a store receives pushes: one at a time for each release, each into temp files of its
 * own under `incoming` (emptied now: leftovers of pushes a crash cut), removed after. */
export class PushReceiver {
  private readonly keys = new Set<string>();

  constructor(
    private readonly incoming: string,
    readonly maxBytes: number,
  ) {
    rmSync(incoming, { recursive: true, force: true });
    mkdirSync(incoming, { recursive: true, mode: 0o700 });
  }

  /**
   * A push: its version, arch and manifest checked, the executable received into `<tmp>.bin`
   * and checked against the manifest, then given to `keep` (which may write `<tmp>.gz`). A
   * release of that name already stored (`existing`) answers without `keep` when its bytes are
   * the same, and Conflict when not; so does a push of the name under way.
   */
  async push(
    p: { version: string; arch: string; manifest: string; body: Upload },
    existing: () => Promise<ReleaseInfo | undefined>,
    keep: (tmp: string, fields: ReleaseFields) => Promise<PushOutcome>,
  ): Promise<PushOutcome> {
    const fields = parsePushed(p.manifest, checkVersion(p.version), checkArch(p.arch));
    if (fields.size > this.maxBytes) throw tooLarge(fields.size, this.maxBytes);
    const key = `${p.version}/${p.arch}`;
    if (this.keys.has(key))
      throw new StatusError("Conflict", `a push of release ${key} is already under way`);
    this.keys.add(key);
    const tmp = join(this.incoming, randomBytes(8).toString("hex"));
    try {
      const stored = await existing();
      if (stored !== undefined && stored.sha256 !== fields.sha256) throw conflict(key, stored);
      await receive(p.body, `${tmp}.bin`, fields, this.maxBytes);
      if (stored !== undefined) return { stored: false, info: stored };
      return await keep(tmp, fields);
    } catch (err) {
      throw diskFull(err, key);
    } finally {
      this.keys.delete(key);
      await rm(`${tmp}.bin`, { force: true });
      await rm(`${tmp}.gz`, { force: true });
    }
  }
}
