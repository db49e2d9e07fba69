// The volume manager: prepares a pod's volumes before its containers start, keeps the files of
// configMap, secret, downwardAPI and projected volumes following their objects, and takes the
// mounts down when the pod goes.
//
// Invariants:
// - an in-memory volume (secret, downwardAPI, projected, emptyDir with medium Memory) is a tmpfs
//   before anything is written into it; a folder that already is one (an agent restarted under
//   running containers) is used as it is, never mounted over;
// - a volume that could not be set up blocks its pod only until it was set up once: later
//   failures (an object deleted) leave the last content in place, with a FailedMount event;
// - a pod's folder is removed only once nothing is mounted under it.

import { chmod, lstat, mkdir, rm, stat, writeFile } from "node:fs/promises";
import { memoryToBytes, type NodeAllocatable, type Pod, type Volume } from "../../api/index.ts";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import { podResourceConfig } from "../cm/pod-resources.ts";
import type { ObjectLookup } from "../sources/index.ts";
import { writeAtomically } from "./atomic-writer.ts";
import type { Mounter } from "./mounter.ts";
import { applyFsGroup } from "./ownership.ts";
import {
  inMemory,
  missingAsUndefined,
  pluginOf,
  podDir,
  subPathTarget,
  volumeDir,
} from "./paths.ts";
import { volumePayload } from "./payload.ts";
import { prepareSubPath } from "./subpath.ts";

/** Records an event about a pod (the agent's recorder). */
type VolumeEventRecorder = (
  pod: Pod,
  type: "Normal" | "Warning",
  reason: string,
  message: string,
) => void;

export interface VolumeManagerDeps {
  rootDir: string;
  nodeName: string;
  /** The ConfigMaps and Secrets volumes read. */
  objects: ObjectLookup;
  /** The node's allocatable: default tmpfs size, resourceFieldRef of a container with no limit. */
  allocatable: () => NodeAllocatable;
  clock: Clock;
  logger: Logger;
  recorder: VolumeEventRecorder;
  mounter: Mounter;
}

interface FailedVolume {
  volume: string;
  /** The kubelet's message, e.g. `configmap "cfg" not found`. */
  message: string;
}

/** A subPath mount of a container: the `index`th of its volumeMounts, `subPath` expanded. */
export interface SubPathMount {
  container: string;
  index: number;
  volume: string;
  subPath: string;
}

/** A disk-backed emptyDir with a sizeLimit: its usage is the eviction manager's to check. */
export interface DiskEmptyDirLimit {
  volume: string;
  path: string;
  limitBytes: number;
}

export interface MountPodResult {
  /** Every volume is set up (or was, once); the pod's containers may start. */
  ready: boolean;
  /** Volumes that could not be set up now. */
  failed: FailedVolume[];
}

type Stats = import("node:fs").Stats;
const HOSTPATH_KIND: Record<string, [(s: Stats) => boolean, string]> = {
  Directory: [(s) => s.isDirectory(), "a directory"],
  File: [(s) => s.isFile(), "a file"],
  Socket: [(s) => s.isSocket(), "a socket file"],
  CharDevice: [(s) => s.isCharacterDevice(), "a character device"],
  BlockDevice: [(s) => s.isBlockDevice(), "a block device"],
};

/** kubelet's hostPath type check: creates a missing DirectoryOrCreate/FileOrCreate path. */
async function checkHostPath(path: string, type: string): Promise<void> {
  if (type === "") return;
  const info = await stat(path).catch(missingAsUndefined);
  if (!info && type === "DirectoryOrCreate") {
    await mkdir(path, { recursive: true, mode: 0o755 });
    return;
  }
  if (!info && type === "FileOrCreate") return writeFile(path, "", { mode: 0o644 });
  const base = type === "DirectoryOrCreate" ? "Directory" : type === "FileOrCreate" ? "File" : type;
  const check = HOSTPATH_KIND[base];
  if (!check) throw new Error(`${type} is an invalid volume type`);
  if (!info || !check[0](info))
    throw new Error(`hostPath type check failed: ${path} is not ${check[1]}`);
}

export class Volumes {
  /** "uid/volume" of every volume set up at least once by this process. */
  private readonly setUp = new Set<string>();

  constructor(private readonly deps: VolumeManagerDeps) {}

  async mountPod(pod: Pod, podRunning: boolean): Promise<MountPodResult> {
    const uid = pod.metadata.uid ?? "";
    const failed: FailedVolume[] = [];
    let ready = true;
    for (const v of pod.spec.volumes ?? []) {
      try {
        await this.setUpVolume(pod, v);
        this.setUp.add(`${uid}/${v.name}`);
      } catch (err) {
        const message = (err as Error).message;
        failed.push({ volume: v.name, message });
        if (!podRunning && !this.setUp.has(`${uid}/${v.name}`)) ready = false;
        this.deps.recorder(
          pod,
          "Warning",
          "FailedMount",
          `MountVolume.SetUp failed for volume ${JSON.stringify(v.name)} : ${message}`,
        );
        this.deps.logger.warn("cannot set up a volume", {
          pod: pod.metadata.name,
          volume: v.name,
          error: message,
        });
      }
    }
    return { ready, failed };
  }

  private async setUpVolume(pod: Pod, v: Volume): Promise<void> {
    if (v.hostPath) return checkHostPath(v.hostPath.path, v.hostPath.type ?? "");
    const kind = pluginOf(v);
    if (kind === undefined)
      throw new Error(`volume ${JSON.stringify(v.name)} has no supported source`);
    const dir = volumeDir(this.deps.rootDir, pod.metadata.uid ?? "", kind, v.name);
    // The kubelet's volume ownership: the volume's folder (an emptyDir's content is the
    // containers', and keeps the group through the folder's setgid bit).
    const fsGroup = pod.spec.securityContext?.fsGroup;
    const own = (readOnly: boolean) =>
      fsGroup === undefined ? undefined : applyFsGroup(dir, fsGroup, readOnly);
    if (kind === "emptyDir" && !inMemory(v)) {
      await mkdir(dir, { recursive: true });
      await chmod(dir, 0o777);
      return own(false);
    }
    // The content first: a missing object leaves nothing mounted.
    const payload = kind === "emptyDir" ? undefined : volumePayload(pod, v, this.payloadContext());
    if (payload && !payload.ok) throw new Error(payload.message);
    await mkdir(dir, { recursive: true, mode: 0o750 });
    if (inMemory(v)) await this.ensureTmpfs(dir, this.tmpfsSize(pod, v));
    if (payload?.ok)
      await writeAtomically(dir, payload.files, new Date(this.deps.clock.now()), fsGroup);
    return own(kind !== "emptyDir");
  }

  private payloadContext() {
    return {
      objects: this.deps.objects,
      allocatable: this.deps.allocatable(),
      nodeName: this.deps.nodeName,
    };
  }

  /** kubelet: the pod's memory limit, else node allocatable; a smaller sizeLimit wins. */
  tmpfsSize(pod: Pod, v: Volume): number {
    let size = this.deps.allocatable().memory;
    const podLimit = podResourceConfig(pod, { podPidsLimit: 0 }).memory ?? 0;
    if (podLimit > 0 && podLimit <= size) size = podLimit;
    const limit = v.emptyDir?.sizeLimit ? memoryToBytes(v.emptyDir.sizeLimit) : 0;
    if (limit > 0 && limit <= size) size = limit;
    return size;
  }

  /** Checked on every write, from the mount table: a Secret is never written to a folder whose
   * tmpfs someone unmounted. */
  private async ensureTmpfs(dir: string, size: number): Promise<void> {
    const here = (await this.deps.mounter.mountsUnder(dir)).find((m) => m.path === dir);
    if (here && here.fsType !== "tmpfs")
      throw new Error(`${dir} is already a mount point of a ${here.fsType} filesystem`);
    if (!here) await this.deps.mounter.mountTmpfs(dir, size);
  }

  /** The host path containers mount for a volume; undefined for an unknown volume. */
  hostPath(pod: Pod, name: string): { path: string; readOnly: boolean } | undefined {
    const v = pod.spec.volumes?.find((x) => x.name === name);
    if (!v) return undefined;
    if (v.hostPath) return { path: v.hostPath.path, readOnly: false };
    const kind = pluginOf(v);
    if (kind === undefined) return undefined;
    // configMap, secret, downwardAPI and projected volumes are read-only in containers.
    return {
      path: volumeDir(this.deps.rootDir, pod.metadata.uid ?? "", kind, name),
      readOnly: kind !== "emptyDir",
    };
  }

  async subPath(pod: Pod, mount: SubPathMount): Promise<string> {
    const host = this.hostPath(pod, mount.volume);
    if (!host) throw new Error(`cannot find volume ${JSON.stringify(mount.volume)}`);
    const uid = pod.metadata.uid ?? "";
    const { volume, container, index, subPath } = mount;
    const target = subPathTarget(this.deps.rootDir, uid, volume, container, index);
    const req = {
      volumePath: host.path,
      subPath,
      target,
      volumeName: volume,
      containerName: container,
    };
    return prepareSubPath(req, this.deps.mounter, this.deps.logger);
  }

  diskEmptyDirLimits(pod: Pod): DiskEmptyDirLimit[] {
    const out: DiskEmptyDirLimit[] = [];
    for (const v of pod.spec.volumes ?? []) {
      if (!v.emptyDir || inMemory(v) || !v.emptyDir.sizeLimit) continue;
      const limitBytes = memoryToBytes(v.emptyDir.sizeLimit);
      if (limitBytes <= 0) continue;
      const path = volumeDir(this.deps.rootDir, pod.metadata.uid ?? "", "emptyDir", v.name);
      out.push({ volume: v.name, path, limitBytes });
    }
    return out;
  }

  async unmountPod(uid: string): Promise<boolean> {
    const dir = podDir(this.deps.rootDir, uid);
    for (const m of await this.deps.mounter.mountsUnder(dir)) {
      await this.deps.mounter
        .unmount(m.path)
        .catch((error) =>
          this.deps.logger.warn("cannot unmount a volume", { uid, path: m.path, error }),
        );
    }
    for (const key of this.setUp) if (key.startsWith(`${uid}/`)) this.setUp.delete(key);
    const left = await this.deps.mounter.mountsUnder(dir);
    if (left.length === 0) return true;
    this.deps.logger.warn("something is still mounted in a pod's folder", {
      uid,
      mounts: left.map((m) => m.path),
    });
    return false;
  }

  async removePod(uid: string): Promise<boolean> {
    const dir = podDir(this.deps.rootDir, uid);
    if (!(await lstat(dir).catch(missingAsUndefined))) return true;
    if (!(await this.unmountPod(uid))) return false;
    await rm(dir, { recursive: true, force: true });
    return true;
  }
}
