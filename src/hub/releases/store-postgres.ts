// The hub's agent releases (store.ts) in the replicas' PostgreSQL database (migration 6), so that
// a release pushed at one replica is downloaded from any: a row a release (its manifest, the size
// and sha256 of its gzip) and the gzip in chunks of CHUNK bytes (`bytea` rows), written with the
// row in one transaction and read one chunk at a time as they are sent.
// Invariants: a release is visible only with all its chunks (one transaction); the push is
// received and compressed in `<data>/releases/.incoming` first, as the folder store does, so
// neither the upload nor the gzip is held in memory; a whole read checks the gzip's sha256 and
// ends the stream with an error when it differs (a device checks the executable's anyway).
import { digestFile } from "../../release/digest.ts";
import { parseManifest, type ReleaseFields } from "../../release/manifest.ts";
import { type PgPool, transaction } from "../pg/transaction.ts";
import {
  DEFAULT_MAX_RELEASE_BYTES,
  infoOf,
  type PushOutcome,
  type ReleaseInfo,
  type Releases,
  type StoredRelease,
} from "./store.ts";
import {
  checkArch,
  checkVersion,
  compress,
  conflict,
  isReleaseName,
  PushReceiver,
  rfc3339,
  type Upload,
} from "./upload.ts";

/** Bytes of a stored chunk (the last one of a release is shorter). */
export const CHUNK = 1024 * 1024;

interface ReleaseRow {
  manifest: string;
  compressed_size: string;
  pushed_at: string;
}

function storedOf(row: ReleaseRow): StoredRelease {
  return {
    ...parseManifest(row.manifest),
    compressedSize: Number(row.compressed_size),
    pushedAt: rfc3339(Number(row.pushed_at)),
    manifest: row.manifest,
  };
}

export class PostgresReleaseStore implements Releases {
  private readonly pushes: PushReceiver;

  /** `incoming`: where pushes are received and compressed (emptied now). */
  constructor(
    private readonly pool: PgPool,
    incoming: string,
    readonly maxBytes = DEFAULT_MAX_RELEASE_BYTES,
    private readonly now: () => number = Date.now,
  ) {
    this.pushes = new PushReceiver(incoming, maxBytes);
  }

  async get(version: string, arch: string): Promise<StoredRelease | undefined> {
    if (!isReleaseName(version, arch)) return undefined;
    const rows = (await transaction(this.pool, (tx) =>
      tx.unsafe(
        "SELECT manifest, compressed_size, pushed_at FROM releases WHERE version = $1 AND arch = $2",
        [version, arch],
      ),
    )) as ReleaseRow[];
    const row = rows[0];
    return row === undefined ? undefined : storedOf(row);
  }

  async list(): Promise<ReleaseInfo[]> {
    const rows = (await transaction(this.pool, (tx) =>
      tx.unsafe(`SELECT manifest, compressed_size, pushed_at FROM releases
                 ORDER BY version COLLATE "C", arch COLLATE "C"`),
    )) as ReleaseRow[];
    return rows.map((r) => infoOf(storedOf(r)));
  }

  push(version: string, arch: string, manifest: string, body: Upload): Promise<PushOutcome> {
    return this.pushes.push(
      { version, arch, manifest, body },
      async () => {
        const r = await this.get(version, arch);
        return r === undefined ? undefined : infoOf(r);
      },
      async (tmp, fields) => {
        await compress(`${tmp}.bin`, `${tmp}.gz`);
        return this.store(`${tmp}.gz`, fields, manifest);
      },
    );
  }

  /** Writes the row and the chunks of the gzip file `gz` in one transaction; a release stored
   * by another replica meanwhile is found (the same bytes) or a Conflict. */
  private async store(gz: string, fields: ReleaseFields, manifest: string): Promise<PushOutcome> {
    const key = `${fields.version}/${fields.arch}`;
    const digest = await digestFile(gz);
    const stored = await transaction(this.pool, async (tx) => {
      const mine = await tx.unsafe(
        `INSERT INTO releases (version, arch, manifest, sha256, compressed_size,
           compressed_sha256, pushed_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT DO NOTHING RETURNING version`,
        [
          fields.version,
          fields.arch,
          manifest,
          fields.sha256,
          digest.size,
          digest.sha256,
          this.now(),
        ],
      );
      if (mine.length === 0) return false;
      const file = Bun.file(gz);
      for (let idx = 0; idx * CHUNK < digest.size; idx++) {
        const data = new Uint8Array(await file.slice(idx * CHUNK, (idx + 1) * CHUNK).arrayBuffer());
        await tx.unsafe(
          "INSERT INTO release_chunks (version, arch, idx, data) VALUES ($1, $2, $3, $4)",
          [fields.version, fields.arch, idx, data],
        );
      }
      return true;
    });
    const now = await this.get(fields.version, fields.arch);
    if (now === undefined) throw new Error(`release ${key} vanished`);
    if (!stored && now.sha256 !== fields.sha256) throw conflict(key, now);
    return { stored, info: infoOf(now) } as PushOutcome;
  }

  async delete(version: string, arch?: string): Promise<string[]> {
    checkVersion(version);
    if (arch !== undefined) checkArch(arch);
    const rows = (await transaction(this.pool, (tx) =>
      tx.unsafe(
        `DELETE FROM releases WHERE version = $1 AND ($2::text IS NULL OR arch = $2)
         RETURNING arch`,
        [version, arch ?? null],
      ),
    )) as { arch: string }[];
    return rows.map((r) => `${version}/${r.arch}`).sort();
  }

  read(r: StoredRelease, start: number, end: number): ReadableStream<Uint8Array> {
    return readChunks(this.pool, r, start, end);
  }
}

/** Bytes [start, end] of release `r`'s gzip, a chunk a pull; a whole read is checked against the
 * stored sha256 of the gzip. */
function readChunks(
  pool: PgPool,
  r: StoredRelease,
  start: number,
  end: number,
): ReadableStream<Uint8Array> {
  const whole = start === 0 && end === r.compressedSize - 1;
  const hash = whole ? new Bun.CryptoHasher("sha256") : undefined;
  let idx = Math.floor(start / CHUNK);
  const last = Math.floor(end / CHUNK);
  const what = `release ${r.version}/${r.arch}`;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const rows = (await transaction(pool, (tx) =>
          tx.unsafe(
            "SELECT data FROM release_chunks WHERE version = $1 AND arch = $2 AND idx = $3",
            [r.version, r.arch, idx],
          ),
        )) as { data: Uint8Array }[];
        const data = rows[0]?.data;
        const want = Math.min(CHUNK, r.compressedSize - idx * CHUNK);
        if (data === undefined || data.length !== want)
          throw new Error(`${what}: chunk ${idx} is missing or not ${want} bytes in the store`);
        hash?.update(data);
        // The last bytes of a whole read are sent only once the whole was checked.
        if (idx === last && hash !== undefined) await checkWhole(pool, r, hash.digest("hex"));
        const from = idx === Math.floor(start / CHUNK) ? start - idx * CHUNK : 0;
        const to = idx === last ? end - idx * CHUNK + 1 : data.length;
        controller.enqueue(data.subarray(from, to));
        if (idx++ === last) controller.close();
      } catch (err) {
        controller.error(err);
      }
    },
  });
}

/** Throws when `sha256` is not the stored gzip's. */
async function checkWhole(pool: PgPool, r: StoredRelease, sha256: string): Promise<void> {
  const rows = (await transaction(pool, (tx) =>
    tx.unsafe("SELECT compressed_sha256 FROM releases WHERE version = $1 AND arch = $2", [
      r.version,
      r.arch,
    ]),
  )) as { compressed_sha256: string }[];
  const want = rows[0]?.compressed_sha256;
  if (want !== sha256)
    throw new Error(
      `release ${r.version}/${r.arch}: the stored gzip's sha256 is ${sha256}, not ${want ?? "(release gone)"}`,
    );
}
