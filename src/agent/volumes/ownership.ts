// A pod's fsGroup on its volumes, as the kubelet applies it (volume ownership): what a volume
// holds gets the fsGroup as its group; files gain group read (the read-only volumes: configMap,
// secret, downwardAPI, projected) or group read-write (emptyDir); folders gain group search and
// the setgid bit, so that what containers create in them later keeps the group. Symlinks get the
// group only. The owner stays as it is.
import { chmod, lchown, lstat } from "node:fs/promises";

const READ_ONLY = 0o440;
const READ_WRITE = 0o660;
const FOLDER = 0o2110;

/** The mode a file or folder has once the fsGroup is applied to it. */
export function fsGroupMode(mode: number, folder: boolean, readOnly: boolean): number {
  return (mode & 0o7777) | (readOnly ? READ_ONLY : READ_WRITE) | (folder ? FOLDER : 0);
}

/** Gives one path (not what is under it) the fsGroup, changing only what differs. */
export async function applyFsGroup(path: string, gid: number, readOnly: boolean): Promise<void> {
  const info = await lstat(path);
  if (info.gid !== gid) await lchown(path, info.uid, gid);
  if (info.isSymbolicLink()) return;
  const mode = fsGroupMode(info.mode, info.isDirectory(), readOnly);
  if ((info.mode & 0o7777) !== mode) await chmod(path, mode);
}
