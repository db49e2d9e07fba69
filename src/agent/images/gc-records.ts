// The image GC's records on disk (<rootDir>/state/image-gc.json, docs/runtime-contract.md): when
// each image was first seen and last used, so that an agent restart neither makes every image
// look new (the minimum age would keep them all) nor unused since forever.
import { readFile } from "node:fs/promises";
import { z } from "zod";
import { writeFileAtomic } from "../../util/atomic-file.ts";
import type { ImageUse } from "./gc-plan.ts";

/** A last-use time that moved on by less than this since the file was written is not worth a
 * write on its own (flash wears with every write). */
export const RECORD_SAVE_GRANULARITY_MS = 10 * 60_000;

const fileSchema = z.object({
  version: z.literal(1),
  images: z.record(
    z.string(),
    z.object({ firstDetected: z.number().nonnegative(), lastUsed: z.number().nonnegative() }),
  ),
});

/** Reads the records; a missing file is none, a malformed one throws naming the file. */
async function loadImageRecords(path: string): Promise<Map<string, ImageUse>> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return new Map();
    throw new Error(`cannot read image records ${path}: ${(err as Error).message}`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new Error(`image records ${path} are not JSON: ${(err as Error).message}`);
  }
  const parsed = fileSchema.safeParse(raw);
  if (!parsed.success) {
    throw new Error(`image records ${path} are malformed: ${parsed.error.issues[0]?.message}`);
  }
  return new Map(Object.entries(parsed.data.images));
}

/** Decides when the records are worth writing, and writes them. */
export class ImageRecordStore {
  /** The records as last written (or read), by image id. */
  private saved = new Map<string, ImageUse>();

  constructor(private readonly path: string) {}

  /** Reads the file; what it held becomes the baseline for needsSave(). */
  async load(): Promise<Map<string, ImageUse>> {
    const records = await loadImageRecords(this.path);
    this.saved = copy(records);
    return records;
  }

  /** Whether `records` differ from the file in the set of images, or in a last use by more than
   * `granularityMs` (RECORD_SAVE_GRANULARITY_MS; 0 when the agent stops: any difference). */
  needsSave(
    records: ReadonlyMap<string, ImageUse>,
    granularityMs = RECORD_SAVE_GRANULARITY_MS,
  ): boolean {
    if (records.size !== this.saved.size) return true;
    for (const [id, r] of records) {
      const old = this.saved.get(id);
      if (old === undefined || old.firstDetected !== r.firstDetected) return true;
      if (Math.abs(r.lastUsed - old.lastUsed) > granularityMs) return true;
    }
    return false;
  }

  /** Writes `records` atomically. */
  save(records: ReadonlyMap<string, ImageUse>): void {
    const images = Object.fromEntries(
      [...records].map(([id, r]) => [id, { firstDetected: r.firstDetected, lastUsed: r.lastUsed }]),
    );
    writeFileAtomic(this.path, `${JSON.stringify({ version: 1, images })}\n`, {
      mode: 0o644,
      dirMode: 0o755,
    });
    this.saved = copy(records);
  }
}

function copy(records: ReadonlyMap<string, ImageUse>): Map<string, ImageUse> {
  return new Map([...records].map(([id, r]) => [id, { ...r }]));
}
