// Where a pod's volumes live on the host (docs/runtime-contract.md), named as the kubelet names
// them so that tools that know the kubelet's layout find them:
//
//   <rootDir>/pods/<uid>/volumes/kubernetes.io~empty-dir/<volume>      disk, or tmpfs (Memory)
//   <rootDir>/pods/<uid>/volumes/kubernetes.io~configmap/<volume>      disk
//   <rootDir>/pods/<uid>/volumes/kubernetes.io~secret/<volume>         tmpfs
//   <rootDir>/pods/<uid>/volumes/kubernetes.io~downward-api/<volume>   tmpfs
//   <rootDir>/pods/<uid>/volumes/kubernetes.io~projected/<volume>      tmpfs
//   <rootDir>/pods/<uid>/volume-subpaths/<volume>/<container>/<index>  subPath bind mounts
//
// hostPath volumes have no folder here.

import { join } from "node:path";
import type { Volume } from "../../api/index.ts";

/** The plugin of each volume source, as a folder name (the kubelet's, "/" written "~"). */
const PLUGIN_DIRS = {
  emptyDir: "kubernetes.io~empty-dir",
  configMap: "kubernetes.io~configmap",
  secret: "kubernetes.io~secret",
  downwardAPI: "kubernetes.io~downward-api",
  projected: "kubernetes.io~projected",
} as const;

export type PluginKind = keyof typeof PLUGIN_DIRS;

export function podDir(rootDir: string, uid: string): string {
  return join(rootDir, "pods", uid);
}

export function volumeDir(rootDir: string, uid: string, kind: PluginKind, name: string): string {
  return join(podDir(rootDir, uid), "volumes", PLUGIN_DIRS[kind], name);
}

/** Where the bind mount of the `index`th volumeMount of a container is made. */
export function subPathTarget(
  rootDir: string,
  uid: string,
  volume: string,
  container: string,
  index: number,
): string {
  return join(podDir(rootDir, uid), "volume-subpaths", volume, container, String(index));
}

/** The plugin a volume uses (hostPath: none). */
export function pluginOf(v: Volume): PluginKind | undefined {
  if (v.emptyDir) return "emptyDir";
  if (v.configMap) return "configMap";
  if (v.secret) return "secret";
  if (v.downwardAPI) return "downwardAPI";
  if (v.projected) return "projected";
  return undefined;
}

/** Whether the volume lives in memory (a tmpfs), never on the device's storage. */
export function inMemory(v: Volume): boolean {
  return v.emptyDir?.medium === "Memory" || !!(v.secret || v.downwardAPI || v.projected);
}

/** For `.catch()` of a file system call: a missing path gives undefined, other errors throw. */
export function missingAsUndefined(err: NodeJS.ErrnoException): undefined {
  if (err.code === "ENOENT") return undefined;
  throw err;
}
