// Container log rotation (kubelet's containerLogManager): every monitor interval, the current log
// of each running container is checked; one at or over maxSize is renamed with a timestamp, the
// runtime reopens the log (CRI ReopenContainerLog), the older rotated files are gzipped, and the
// oldest deleted so that a container keeps at most maxFiles files (docs/runtime-contract.md).
//
// Invariants:
// - run() never throws; a container whose log cannot be rotated is logged and tried again at the
//   next check, and does not hold up the others.
// - When the runtime cannot reopen the log, the rotated file is renamed back, so no line is lost
//   and the next check tries again.
// - An existing file is never overwritten: a rotation whose name is taken waits for the next check.
import { createReadStream, createWriteStream } from "node:fs";
import { rename, rm, stat } from "node:fs/promises";
import { pipeline } from "node:stream/promises";
import { createGzip } from "node:zlib";
import type { CriRuntime } from "../../cri/index.ts";
import { type Clock, sleepQuietly } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import { nodeSelector } from "../kuberuntime/index.ts";
import { rotatedFiles, rotatedPath } from "../logs/index.ts";

interface LogRotationPolicy {
  /** A current log at or over this size is rotated (bytes). */
  maxSizeBytes: number;
  /** Files kept per container, the current one included (at least 2). */
  maxFiles: number;
}

export interface LogRotationDeps {
  cri: Pick<CriRuntime, "listContainers" | "containerStatus" | "reopenContainerLog">;
  clock: Clock;
  logger: Logger;
  /** Only containers labelled for this node are looked at. */
  nodeName: string;
  policy: LogRotationPolicy;
  /** Time between checks (kubelet's containerLogMonitorInterval, 10 s). */
  monitorIntervalMs: number;
}

export interface LogRotation {
  /** Checks every running container's log once; resolves to the number of logs rotated.
   * Throws when the runtime cannot list its containers. */
  rotateLogs(): Promise<number>;
  run(signal: AbortSignal): Promise<void>;
}

/** What to do with a log's rotated files before the current one is rotated. */
export interface RotationPlan {
  /** Temporary files, originals already compressed, and the oldest files beyond the limit. */
  remove: string[];
  /** Rotated files left uncompressed. */
  compress: string[];
}

const GZ = ".gz";
const TMP = ".tmp";

/**
 * Plans the cleanup before a rotation (kubelet's rules) from the log's other files, sorted by
 * name (oldest first): temporary files and originals whose ".gz" exists go; of the others the
 * newest maxFiles - 2 stay (the current file and the one about to be rotated make maxFiles),
 * and those not yet compressed are compressed.
 */
export function planRotation(files: readonly string[], maxFiles: number): RotationPlan {
  const present = new Set(files);
  const remove: string[] = [];
  const inUse: string[] = [];
  for (const f of files) {
    if (f.endsWith(TMP) || (!f.endsWith(GZ) && present.has(`${f}${GZ}`))) remove.push(f);
    else inUse.push(f);
  }
  const keep = Math.max(0, maxFiles - 2);
  const excess = Math.max(0, inUse.length - keep);
  remove.push(...inUse.slice(0, excess));
  const kept = inUse.slice(excess);
  return { remove, compress: kept.filter((f) => !f.endsWith(GZ)) };
}

/** Gzips `path` to `path.gz` through `path.tmp`, then removes `path`. */
async function compress(path: string): Promise<void> {
  const tmp = `${path}${TMP}`;
  try {
    await pipeline(createReadStream(path), createGzip(), createWriteStream(tmp, { mode: 0o644 }));
    await rename(tmp, `${path}${GZ}`);
  } finally {
    await rm(tmp, { force: true });
  }
  await rm(path, { force: true });
}

async function sizeOf(path: string): Promise<number | undefined> {
  try {
    return (await stat(path)).size;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

export function createLogRotation(deps: LogRotationDeps): LogRotation {
  return new LogRotator(deps);
}

class LogRotator implements LogRotation {
  /** Log paths of running containers by id, read once per container (CRI ContainerStatus). */
  private readonly paths = new Map<string, string>();

  constructor(private readonly deps: LogRotationDeps) {}

  async rotateLogs(): Promise<number> {
    const { containers } = await this.deps.cri.listContainers({
      filter: {
        state: { state: "CONTAINER_RUNNING" },
        labelSelector: nodeSelector(this.deps.nodeName),
      },
    });
    const listed = new Set(containers.map((c) => c.id));
    for (const id of this.paths.keys()) if (!listed.has(id)) this.paths.delete(id);
    let rotated = 0;
    for (const c of containers) {
      try {
        if (await this.check(c.id)) rotated++;
      } catch (err) {
        this.deps.logger.warn("cannot rotate a container log", { id: c.id, error: message(err) });
      }
    }
    return rotated;
  }

  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      await sleepQuietly(this.deps.clock, this.deps.monitorIntervalMs, signal);
      if (signal.aborted) break;
      await this.rotateLogs().catch((err) =>
        this.deps.logger.warn("log rotation failed", { error: message(err) }),
      );
    }
  }

  /** Rotates the container's log if it reached maxSize; true when rotated. */
  private async check(id: string): Promise<boolean> {
    const log = await this.logPathOf(id);
    if (log === "") return false;
    let size = await sizeOf(log);
    if (size === undefined) {
      // Lost after a failed reopen (or removed by hand): the runtime makes it again.
      await this.deps.cri.reopenContainerLog({ containerId: id });
      size = await sizeOf(log);
      if (size === undefined) throw new Error(`log ${log} is missing after reopening it`);
    }
    return size >= this.deps.policy.maxSizeBytes ? this.rotate(id, log) : false;
  }

  private async logPathOf(id: string): Promise<string> {
    let path = this.paths.get(id);
    if (path === undefined) {
      path = (await this.deps.cri.containerStatus({ containerId: id })).status?.logPath ?? "";
      this.paths.set(id, path);
    }
    return path;
  }

  /** Cleans up the older files, renames the log and has the runtime reopen it (renaming it back
   * when it cannot); false when the rotated name is taken. */
  private async rotate(id: string, log: string): Promise<boolean> {
    const deps = this.deps;
    const target = rotatedPath(log, deps.clock.now());
    // Taken by the last rotation (within the same second), compressed or not.
    for (const taken of [target, `${target}${GZ}`, `${target}${TMP}`]) {
      if ((await sizeOf(taken)) !== undefined) return false;
    }
    const plan = planRotation(await rotatedFiles(log), deps.policy.maxFiles);
    for (const f of plan.remove) await rm(f, { force: true });
    for (const f of plan.compress) await compress(f);
    await rename(log, target);
    try {
      await deps.cri.reopenContainerLog({ containerId: id });
    } catch (err) {
      await rename(target, log).catch((back) =>
        deps.logger.error("cannot rename a rotated log back", { log, error: message(back) }),
      );
      throw new Error(`cannot reopen the log of container ${id}: ${message(err)}`);
    }
    return true;
  }
}
