// The agent's image import folder with its real parts: the folder listed with node:fs, each
// archive read whole into memory (bounded), planned and carried out through containerd's own
// API in the CRI plugin's namespace.

import { readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import { createContainerdImportCalls } from "../../../cri/containerd-store.ts";
import { parseCriEndpoint } from "../../../cri/endpoint.ts";
import { isCancelled, isDeadlineExceeded, isUnavailable } from "../../../cri/errors.ts";
import type { Clock } from "../../../util/clock.ts";
import type { Logger } from "../../../util/log.ts";
import { ArchiveError, openArchive } from "./archive.ts";
import { executeImport } from "./execute.ts";
import { type FolderFile, ImportFolder } from "./folder.ts";
import { planImport } from "./plan.ts";

/** Largest archive file read (compressed or not), and largest tar after decompression: the
 * archive is held in memory while it is imported. */
const MAX_ARCHIVE_BYTES = 1 << 30;
/** The CRI plugin's namespace and default snapshotter in containerd. */
const CRI_NAMESPACE = "k8s.io";
const SNAPSHOTTER = "overlayfs";

export interface ImageImportInput {
  config: { imagesImportPath: string; containerRuntimeEndpoint: string };
  clock: Clock;
  logger: Logger;
  nodeEvent(type: "Normal" | "Warning", reason: string, message: string): void;
}

async function listFolder(path: string): Promise<FolderFile[]> {
  let names: string[];
  try {
    names = await readdir(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
  const out: FolderFile[] = [];
  for (const name of names) {
    const st = await stat(join(path, name)).catch(() => undefined);
    if (st?.isFile()) out.push({ name, size: st.size, mtimeMs: st.mtimeMs });
  }
  return out;
}

/** Reads, plans and imports the archive at `file`: the image names it gave. */
async function importFile(
  file: string,
  input: ImageImportInput,
  socketPath: string,
  signal: AbortSignal,
): Promise<string[]> {
  const size = (await stat(file)).size;
  if (size > MAX_ARCHIVE_BYTES) {
    throw new ArchiveError(`${size} bytes, more than the limit of ${MAX_ARCHIVE_BYTES}`);
  }
  const archive = openArchive(await Bun.file(file).bytes(), MAX_ARCHIVE_BYTES);
  const steps = planImport(archive.images, SNAPSHOTTER);
  const leaseId = `fleetlet-import-${input.clock.now()}-${crypto.randomUUID().slice(0, 8)}`;
  const callsFor = (lease: string) =>
    createContainerdImportCalls({
      socketPath,
      namespace: CRI_NAMESPACE,
      snapshotter: SNAPSHOTTER,
      lease,
    });
  await executeImport(steps, callsFor, leaseId, input.clock.now(), signal, (err) =>
    input.logger.warn("cannot delete an image import's lease; it expires within an hour", {
      lease: leaseId,
      error: err,
    }),
  );
  return archive.images.flatMap((i) => i.names);
}

/** Whether `err`, or an error it wraps, is the runtime being unreachable or slow. */
function transient(err: unknown): boolean {
  for (let e = err, depth = 0; e !== undefined && depth < 5; depth++) {
    if (isUnavailable(e) || isDeadlineExceeded(e) || isCancelled(e)) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

export function setupImageImport(input: ImageImportInput): ImportFolder {
  const { socketPath } = parseCriEndpoint(input.config.containerRuntimeEndpoint);
  return new ImportFolder({
    path: input.config.imagesImportPath,
    clock: input.clock,
    logger: input.logger.with({ component: "image-import" }),
    periodMs: 5_000,
    settleMs: 2_000,
    list: listFolder,
    importArchive: (file, signal) => importFile(file, input, socketPath, signal),
    transient,
    nodeEvent: input.nodeEvent,
  });
}
