// subPath mounts made safe as the kubelet makes them: the path is resolved (symlinks included)
// and must stay inside the volume, then bind-mounted onto a folder of the pod's own
// (<pod>/volume-subpaths/...), and the bind is checked to be the very file that was checked, so
// that a symlink swapped in between (by another container of the pod) cannot lead the container
// out of its volume. The container mounts the bind, which keeps the content it had even when the
// volume's files are replaced (a configMap update does not reach subPath mounts).
//
// Errors a container shows are the kubelet's, which do not reveal the host's paths; the details
// are logged.

import { lstat, mkdir, realpath, rmdir, unlink, writeFile } from "node:fs/promises";
import { dirname, isAbsolute, join, relative, sep } from "node:path";
import type { Logger } from "../../util/log.ts";
import type { Mounter } from "./mounter.ts";
import { missingAsUndefined } from "./paths.ts";

/** A subPath the container cannot have; the message is the kubelet's. */
class SubPathError extends Error {
  override readonly name = "SubPathError";
}

export interface SubPathRequest {
  /** The volume's folder on the host (for hostPath volumes: the host path). */
  volumePath: string;
  /** The subPath after $(VAR) expansion. */
  subPath: string;
  /** Where the bind mount goes (subPathTarget()). */
  target: string;
  volumeName: string;
  containerName: string;
}

function within(path: string, base: string): boolean {
  const rel = relative(base, path);
  return rel === "" || (!rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel));
}

/** Checks a subPath's text (kubelet: before anything touches the disk). */
function checkSubPathText(subPath: string): void {
  if (isAbsolute(subPath))
    throw new SubPathError(`error SubPath \`${subPath}\` must not be an absolute path`);
  if (subPath.split("/").includes(".."))
    throw new SubPathError(`unable to provision SubPath \`${subPath}\`: must not contain '..'`);
}

/** Creates the missing folders of `subPath` inside `base`, never through a symlink that leads
 * out of it; new folders get `mode`. */
async function safeMakeDir(base: string, subPath: string, mode: number): Promise<void> {
  const realBase = await realpath(base);
  let current = realBase;
  for (const part of subPath.split("/").filter((p) => p !== "" && p !== ".")) {
    const next = join(current, part);
    const info = await lstat(next).catch(missingAsUndefined);
    if (info === undefined) {
      await mkdir(next, { mode });
      current = next;
      continue;
    }
    const resolved = info.isSymbolicLink() ? await realpath(next) : next;
    if (!within(resolved, realBase))
      throw new Error(`${next} leads out of the volume to ${resolved}`);
    current = resolved;
  }
}

/** The resolved path, each of its components checked to be no symlink (nothing swapped). */
async function resolveInside(
  volumePath: string,
  subPath: string,
): Promise<{ path: string; dir: boolean }> {
  const base = await realpath(volumePath);
  const path = await realpath(join(volumePath, subPath));
  if (!within(path, base)) throw new Error(`subpath ${path} not within volume path ${base}`);
  let current = base;
  for (const part of relative(base, path)
    .split(sep)
    .filter((p) => p !== "")) {
    current = join(current, part);
    if ((await lstat(current)).isSymbolicLink())
      throw new Error(`${current} changed into a symlink`);
  }
  return { path, dir: (await lstat(path)).isDirectory() };
}

/**
 * Prepares the subPath mount and returns the host path to give the runtime (the bind target).
 * An existing bind of the same file is reused; one of another file (the subPath changed on
 * disk) is replaced. Throws SubPathError with the kubelet's message.
 */
export async function prepareSubPath(
  req: SubPathRequest,
  mounter: Mounter,
  log: Logger,
): Promise<string> {
  checkSubPathText(req.subPath);
  const fail = (what: string, err: unknown): never => {
    log.warn(`cannot ${what}`, {
      volume: req.volumeName,
      container: req.containerName,
      subPath: req.subPath,
      error: (err as Error).message,
    });
    throw new SubPathError(
      `failed to ${what} for volumeMount ${JSON.stringify(req.volumeName)} of container ${JSON.stringify(req.containerName)}`,
    );
  };
  const full = join(req.volumePath, req.subPath);
  const present = await lstat(full).then(
    () => true,
    () => false,
  );
  if (!present) {
    const mode = (await lstat(req.volumePath)).mode & 0o7777;
    await safeMakeDir(req.volumePath, req.subPath, mode).catch((err) =>
      fail("create subPath directory", err),
    );
  }
  let source: { path: string; dir: boolean } | undefined;
  try {
    source = await resolveInside(req.volumePath, req.subPath);
  } catch (err) {
    return fail("prepare subPath", err);
  }
  try {
    return await bindChecked(source, req.target, mounter);
  } catch (err) {
    return fail("prepare subPath", err);
  }
}

async function bindChecked(
  source: { path: string; dir: boolean },
  target: string,
  mounter: Mounter,
): Promise<string> {
  const id = await mounter.identity(source.path);
  const mounted = (await mounter.mountsUnder(target)).some((m) => m.path === target);
  if (mounted) {
    if ((await mounter.identity(target)) === id) return target;
    await mounter.unmount(target);
  }
  await mkdir(dirname(target), { recursive: true, mode: 0o750 });
  // A target of the wrong kind is removed without recursion: a bind the mount table did not
  // show must never have its content deleted.
  let info = await lstat(target).catch(missingAsUndefined);
  if (info && info.isDirectory() !== source.dir) {
    await (info.isDirectory() ? rmdir(target) : unlink(target));
    info = undefined;
  }
  if (!info && source.dir) await mkdir(target, { mode: 0o750 });
  else if (!info) await writeFile(target, "", { mode: 0o640 });
  await mounter.bind(source.path, target);
  if ((await mounter.identity(target)) !== id) {
    const undo = await mounter.unmount(target).then(
      () => "",
      (err: Error) => `, and the bind could not be undone: ${err.message}`,
    );
    throw new Error(`${source.path} changed while it was mounted${undo}`);
  }
  return target;
}
