// The volume manager (kubelet: pkg/kubelet/volumemanager, minus attach): every volume of a pod
// is prepared before its containers start, kept following the objects it reads, and taken down
// with the pod. See manager.ts for the rules, paths.ts for the layout on disk.

import type { Pod } from "../../api/index.ts";
import {
  type DiskEmptyDirLimit,
  type MountPodResult,
  type SubPathMount,
  type VolumeManagerDeps,
  Volumes,
} from "./manager.ts";

export { writeAtomically } from "./atomic-writer.ts";
export type { VolumeManagerDeps } from "./manager.ts";
export { createSystemMounter, type Mounter, type MountPoint } from "./mounter.ts";
export { volumeDir } from "./paths.ts";
export { type Payload, volumePayload } from "./payload.ts";
export interface VolumeManager {
  /**
   * Sets up every volume of `pod` (kubelet's WaitForAttachAndMount): folders, tmpfs mounts,
   * hostPath type checks, and the files of configMap, secret, downwardAPI and projected
   * volumes, written atomically; volumes set up before are brought up to date. Each volume that
   * fails is a FailedMount event. `ready` is false while a volume the pod never had is missing
   * (unless `podRunning`: the pod's containers already run with what was set up before). Never
   * throws.
   */
  mountPod(pod: Pod, podRunning: boolean): Promise<MountPodResult>;
  /** The host path of a volume for container mounts, and whether it is read-only there
   * (configMap, secret, downwardAPI, projected); undefined for a volume the pod lacks. */
  hostPath(pod: Pod, volume: string): { path: string; readOnly: boolean } | undefined;
  /**
   * Prepares a container's subPath mount (its subPath already expanded): checked to stay
   * inside the volume, bind-mounted under the pod's folder; returns the host path to mount.
   * Throws SubPathError with the kubelet's message.
   */
  subPath(pod: Pod, mount: SubPathMount): Promise<string>;
  /** Disk-backed emptyDirs with a sizeLimit: the eviction manager measures and enforces them. */
  diskEmptyDirLimits(pod: Pod): DiskEmptyDirLimit[];
  /** Unmounts everything under the pod's folder (its tmpfs volumes and subPath binds: a finished
   * pod gives its memory back); false when something could not be unmounted. */
  unmountPod(uid: string): Promise<boolean>;
  /** Unmounts everything under the pod's folder and removes it; false (and the folder kept) when
   * something could not be unmounted. */
  removePod(uid: string): Promise<boolean>;
}

export function createVolumeManager(deps: VolumeManagerDeps): VolumeManager {
  return new Volumes(deps);
}
