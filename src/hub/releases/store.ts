// The hub's store of agent releases (docs/hub-releases.md): each release is one executable for
// one architecture, kept gzip-compressed beside the manifest it was pushed with, under
// `<data>/releases/<version>/<arch>.gz` and `<arch>.sig`.
// Invariants: a release is visible (listed, served) only once its `.sig` exists, and the `.sig`
// is renamed into place after its `.gz` is whole and fsynced, so a failed or cut push never shows
// a partial release; uploads are streamed to `<data>/releases/.incoming/`, then hashed from there,
// and never held in memory; the stored bytes are never replaced by other bytes (a push of other bytes under
// the same version and arch is a Conflict); the hub checks the manifest's form, size and sha256,
// never its signature (devices do: the hub holds no keys).
import { randomBytes } from "node:crypto";
import { createReadStream, createWriteStream, mkdirSync, rmSync } from "node:fs";
import { open, readdir, readFile, rename, rm, rmdir, stat } from "node:fs/promises";
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
import { errorCode, writeFileAtomic } from "../../util/atomic-file.ts";

/** gzip level of stored releases: on a 110 MB fleetlet, 9 gives 51.4 MB in 6.9 s on this
 * machine's core, 6 gives 52.7 MB in 2.7 s, 1 gives 64.2 MB in 1.2 s. A push is compressed once
 * and downloaded by every device, often over metered links: the smallest wins. */
const GZIP_LEVEL = 9;

/** The largest executable the hub takes (a fleetlet is ~110 MB). */
const DEFAULT_MAX_RELEASE_BYTES = 512 * 1024 * 1024;

/** One stored release, as listed. */
export interface ReleaseInfo extends ReleaseFields {
  /** Bytes of the stored gzip file (what a device downloads). */
  compressedSize: number;
  /** RFC 3339: when the push stored it. */
  pushedAt: string;
}

/** A stored release: its manifest text and where its compressed bytes are. */
export interface StoredRelease extends ReleaseInfo {
  manifest: string;
  gzPath: string;
}

/** The pushed executable: a request (or a response) whose body is streamed to disk. */
export type Upload = Request | Response;

/** What a push did: stored the release, or found the same bytes already stored. */
export type PushOutcome =
  | { stored: true; info: ReleaseInfo }
  | { stored: false; info: ReleaseInfo };

const rfc3339 = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");

/** The arch if `arch` is one, else a BadRequest naming it. */
function checkArch(arch: string): Arch {
  if ((ARCHES as readonly string[]).includes(arch)) return arch as Arch;
  throw new StatusError("BadRequest", `unknown arch ${JSON.stringify(arch)}: want amd64 or arm64`);
}

/** The version if it is one, else a BadRequest. */
function checkVersion(version: string): string {
  const problem = versionProblem(version);
  if (problem !== undefined) throw new StatusError("BadRequest", problem);
  return version;
}

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

export class ReleaseStore {
  private readonly incoming: string;
  /** version/arch of the pushes under way (one at a time each). */
  private readonly pushing = new Set<string>();

  /** `root`: `<data>/releases`. Leftovers of pushes cut by a crash are removed. */
  constructor(
    readonly root: string,
    readonly maxBytes = DEFAULT_MAX_RELEASE_BYTES,
  ) {
    this.incoming = join(root, ".incoming");
    rmSync(this.incoming, { recursive: true, force: true });
    mkdirSync(this.incoming, { recursive: true, mode: 0o700 });
  }

  /** The release `version`/`arch`, or undefined when none is stored. */
  async get(version: string, arch: string): Promise<StoredRelease | undefined> {
    if (versionProblem(version) !== undefined || !(ARCHES as readonly string[]).includes(arch))
      return undefined;
    const base = join(this.root, version, arch);
    let manifest: string;
    let pushed: number;
    try {
      manifest = await readFile(`${base}.sig`, "utf8");
      pushed = (await stat(`${base}.sig`)).mtimeMs;
    } catch (err) {
      if ((err as { code?: string }).code === "ENOENT") return undefined;
      throw err;
    }
    const gz = await stat(`${base}.gz`);
    const fields = parseManifest(manifest);
    return {
      ...fields,
      compressedSize: gz.size,
      pushedAt: rfc3339(pushed),
      manifest,
      gzPath: `${base}.gz`,
    };
  }

  /** Every stored release, by version then arch. */
  async list(): Promise<ReleaseInfo[]> {
    const out: ReleaseInfo[] = [];
    const versions = (await readdir(this.root)).filter((v) => versionProblem(v) === undefined);
    for (const version of versions.sort()) {
      for (const arch of ARCHES) {
        const r = await this.get(version, arch);
        if (r === undefined) continue;
        const { manifest: _m, gzPath: _g, ...info } = r;
        out.push(info);
      }
    }
    return out;
  }

  /**
   * Stores the executable read from `body` as release `version`/`arch` described by `manifest`
   * (its text). Refuses (StatusError) a malformed manifest or one of another release (400), bytes
   * whose size or sha256 differ from it (400), more than maxBytes (413), other bytes than those
   * stored (409), and a push of the same release under way (409).
   */
  async push(version: string, arch: string, manifest: string, body: Upload): Promise<PushOutcome> {
    const fields = parsePushed(manifest, checkVersion(version), checkArch(arch));
    if (fields.size > this.maxBytes) throw this.tooLarge(fields.size);
    const key = `${version}/${arch}`;
    if (this.pushing.has(key))
      throw new StatusError("Conflict", `a push of release ${key} is already under way`);
    this.pushing.add(key);
    try {
      const existing = await this.get(version, arch);
      if (existing !== undefined && existing.sha256 !== fields.sha256)
        throw conflict(key, existing);
      const tmp = join(this.incoming, randomBytes(8).toString("hex"));
      try {
        await this.receive(body, `${tmp}.bin`, fields);
        if (existing !== undefined) return { stored: false, info: existing };
        return {
          stored: true,
          info: await this.store(`${tmp}.bin`, `${tmp}.gz`, fields, manifest),
        };
      } catch (err) {
        throw diskFull(err, key);
      } finally {
        await rm(`${tmp}.bin`, { force: true });
        await rm(`${tmp}.gz`, { force: true });
      }
    } finally {
      this.pushing.delete(key);
    }
  }

  /** Removes release `version` for `arch` (absent: every arch); returns what it removed. */
  async delete(version: string, arch?: string): Promise<string[]> {
    checkVersion(version);
    const arches = arch === undefined ? ARCHES : [checkArch(arch)];
    const removed: string[] = [];
    for (const a of arches) {
      const base = join(this.root, version, a);
      if ((await this.get(version, a)) === undefined) continue;
      // The manifest goes first: from then on the release is gone, whatever happens next.
      await rm(`${base}.sig`, { force: true });
      await rm(`${base}.gz`, { force: true });
      removed.push(`${version}/${a}`);
    }
    // The version's folder goes once it is empty.
    await rmdir(join(this.root, version)).catch(() => {});
    return removed;
  }

  private tooLarge(size: number): StatusError {
    return new StatusError(
      "RequestEntityTooLarge",
      `the release is ${size} bytes, over the hub's limit of ${this.maxBytes} bytes`,
    );
  }

  /**
   * Writes `body` to `path` (Bun streams it to disk natively: a few MB of memory, where reading
   * the body's chunks in JS lets a fast client fill ~40 MB of the hub's memory), then checks its
   * size and sha256 against `want`, reading the file back in chunks.
   */
  private async receive(body: Upload, path: string, want: ReleaseFields): Promise<void> {
    await Bun.write(path, body);
    const got = await digestFile(path);
    if (got.size > this.maxBytes) throw this.tooLarge(got.size);
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

  /** Compresses `bin` into `<version>/<arch>.gz` (through `gzTmp`), then writes the manifest. */
  private async store(
    bin: string,
    gzTmp: string,
    fields: ReleaseFields,
    manifest: string,
  ): Promise<ReleaseInfo> {
    await pipeline(
      // 64 KiB reads: 1 MiB ones cost ~10 MB more of the hub's peak memory for no speed.
      createReadStream(bin, { highWaterMark: 65_536 }),
      createGzip({ level: GZIP_LEVEL }),
      createWriteStream(gzTmp, { mode: 0o644 }),
    );
    await fsyncPath(gzTmp);
    const dir = join(this.root, fields.version);
    mkdirSync(dir, { recursive: true, mode: 0o755 });
    await rename(gzTmp, join(dir, `${fields.arch}.gz`));
    await fsyncPath(dir);
    writeFileAtomic(join(dir, `${fields.arch}.sig`), manifest, { mode: 0o644, dirMode: 0o755 });
    const stored = await this.get(fields.version, fields.arch);
    if (stored === undefined) throw new Error(`release ${fields.version}/${fields.arch} vanished`);
    const { manifest: _m, gzPath: _g, ...info } = stored;
    return info;
  }
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

function conflict(key: string, existing: ReleaseInfo): StatusError {
  return new StatusError(
    "Conflict",
    `release ${key} is already stored with other bytes (sha256 ${existing.sha256.slice(0, 12)}…, ${existing.size} bytes, pushed ${existing.pushedAt}): give the new build a new version, or delete the stored one first`,
  );
}

/** fsync of a file or folder (a folder where the platform allows it). */
async function fsyncPath(path: string): Promise<void> {
  const fd = await open(path, "r");
  try {
    await fd.sync().catch(() => {});
  } finally {
    await fd.close();
  }
}
