// The hub's store of agent releases (docs/hub-releases.md): each release is one executable for
// one architecture, kept gzip-compressed beside the manifest it was pushed with. `Releases` is
// its interface; `ReleaseStore` keeps them in a folder (a single hub's `<data>/releases`),
// `PostgresReleaseStore` (store-postgres.ts) in the replicas' database.
// Invariants of every implementation: a release is visible (listed, served) only once it is
// whole; uploads are streamed to a temp file, checked against their manifest's size and sha256,
// and never held in memory; the stored bytes are never replaced by other bytes (a push of other
// bytes under the same version and arch is a Conflict); the hub checks the manifest's form, size
// and sha256, never its signature (devices do: the hub holds no keys).
// The folder: `<root>/<version>/<arch>.gz` and `<arch>.sig`; the `.sig` is renamed into place
// after its `.gz` is whole and fsynced, so a failed or cut push never shows a partial release.
import { mkdirSync } from "node:fs";
import { readdir, readFile, rename, rm, rmdir, stat } from "node:fs/promises";
import { join } from "node:path";
import {
  ARCHES,
  parseManifest,
  type ReleaseFields,
  versionProblem,
} from "../../release/manifest.ts";
import { writeFileAtomic } from "../../util/atomic-file.ts";
import {
  checkArch,
  checkVersion,
  compress,
  fsyncPath,
  isReleaseName,
  PushReceiver,
  rfc3339,
  type Upload,
} from "./upload.ts";

/** The largest executable the hub takes (a fleetlet is ~110 MB). */
export const DEFAULT_MAX_RELEASE_BYTES = 512 * 1024 * 1024;

/** One stored release, as listed. */
export interface ReleaseInfo extends ReleaseFields {
  /** Bytes of the stored gzip (what a device downloads). */
  compressedSize: number;
  /** RFC 3339: when the push stored it. */
  pushedAt: string;
}

/** A stored release with its manifest text. */
export interface StoredRelease extends ReleaseInfo {
  manifest: string;
}

/** What a push did: stored the release, or found the same bytes already stored. */
export type PushOutcome =
  | { stored: true; info: ReleaseInfo }
  | { stored: false; info: ReleaseInfo };

/** The hub's agent releases. */
export interface Releases {
  /** The largest executable a push may upload. */
  readonly maxBytes: number;
  /** The release `version`/`arch`, or undefined when none is stored. */
  get(version: string, arch: string): Promise<StoredRelease | undefined>;
  /** Every stored release, by version then arch. */
  list(): Promise<ReleaseInfo[]>;
  /**
   * Stores the executable read from `body` as release `version`/`arch` described by `manifest`
   * (its text). Refuses (StatusError) a malformed manifest or one of another release (400), bytes
   * whose size or sha256 differ from it (400), more than maxBytes (413), other bytes than those
   * stored (409), and a push of the same release under way at this hub (409).
   */
  push(version: string, arch: string, manifest: string, body: Upload): Promise<PushOutcome>;
  /** Removes release `version` for `arch` (absent: every arch); returns what it removed. */
  delete(version: string, arch?: string): Promise<string[]>;
  /** Bytes [start, end] (inclusive) of release `r`'s stored gzip, read as they are sent; a
   * stream that errors when the stored bytes are not what was stored. */
  read(r: StoredRelease, start: number, end: number): Blob | ReadableStream<Uint8Array>;
}

/** The info of a stored release (its manifest left out). */
export function infoOf(r: StoredRelease): ReleaseInfo {
  const { manifest: _m, ...info } = r;
  return info;
}

export class ReleaseStore implements Releases {
  private readonly pushes: PushReceiver;

  /** `root`: `<data>/releases`. Leftovers of pushes cut by a crash are removed. */
  constructor(
    readonly root: string,
    readonly maxBytes = DEFAULT_MAX_RELEASE_BYTES,
  ) {
    this.pushes = new PushReceiver(join(root, ".incoming"), maxBytes);
  }

  async get(version: string, arch: string): Promise<StoredRelease | undefined> {
    if (!isReleaseName(version, arch)) return undefined;
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
    return { ...fields, compressedSize: gz.size, pushedAt: rfc3339(pushed), manifest };
  }

  async list(): Promise<ReleaseInfo[]> {
    const out: ReleaseInfo[] = [];
    const versions = (await readdir(this.root)).filter((v) => versionProblem(v) === undefined);
    for (const version of versions.sort()) {
      for (const arch of ARCHES) {
        const r = await this.get(version, arch);
        if (r !== undefined) out.push(infoOf(r));
      }
    }
    return out;
  }

  read(r: StoredRelease, start: number, end: number): Blob {
    return Bun.file(join(this.root, r.version, `${r.arch}.gz`)).slice(start, end + 1);
  }

  push(version: string, arch: string, manifest: string, body: Upload): Promise<PushOutcome> {
    return this.pushes.push(
      { version, arch, manifest, body },
      async () => {
        const r = await this.get(version, arch);
        return r === undefined ? undefined : infoOf(r);
      },
      async (tmp, fields) => ({
        stored: true,
        info: await this.store(`${tmp}.bin`, `${tmp}.gz`, fields, manifest),
      }),
    );
  }

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

  /** Compresses `bin` into `<version>/<arch>.gz` (through `gzTmp`), then writes the manifest. */
  private async store(
    bin: string,
    gzTmp: string,
    fields: ReleaseFields,
    manifest: string,
  ): Promise<ReleaseInfo> {
    await compress(bin, gzTmp);
    const dir = join(this.root, fields.version);
    mkdirSync(dir, { recursive: true, mode: 0o755 });
    await rename(gzTmp, join(dir, `${fields.arch}.gz`));
    await fsyncPath(dir);
    writeFileAtomic(join(dir, `${fields.arch}.sig`), manifest, { mode: 0o644, dirMode: 0o755 });
    const stored = await this.get(fields.version, fields.arch);
    if (stored === undefined) throw new Error(`release ${fields.version}/${fields.arch} vanished`);
    return infoOf(stored);
  }
}
