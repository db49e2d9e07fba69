// What a pod uses, as the ranking functions and eviction messages read it: memory working set,
// processes, and local storage split the way the kubelet's summary splits it (each container's
// writable layer and logs, the pod's disk-backed emptyDir volumes).

/** Bytes and inodes of one place on disk. */
export interface DiskUsage {
  bytes: number;
  inodes: number;
}

export interface ContainerUsage {
  name: string;
  /** Working set bytes (usage minus inactive file cache); undefined when unknown. */
  memory?: number;
  /** The writable layer, on the image filesystem. */
  rootfs?: DiskUsage;
  /** Its log files, on the node filesystem. */
  logs?: DiskUsage;
}

export interface PodUsage {
  /** The pod's working set bytes. */
  memory?: number;
  /** Processes (threads, as the pids controller counts them) in the pod. */
  processes?: number;
  containers: ContainerUsage[];
  /** Disk-backed emptyDir volumes by volume name. */
  volumes: ReadonlyMap<string, DiskUsage>;
}

/** Which parts of a pod's storage a disk signal measures (the kubelet's fsStatsType). */
export interface DiskParts {
  rootfs: boolean;
  logs: boolean;
  volumes: boolean;
}

/** All of it: one filesystem holds everything. */
const ALL_PARTS: DiskParts = Object.freeze({ rootfs: true, logs: true, volumes: true });

const add = (a: DiskUsage, b: DiskUsage | undefined): DiskUsage =>
  b === undefined ? a : { bytes: a.bytes + b.bytes, inodes: a.inodes + b.inodes };

/** The pod's local storage in the given parts. */
export function podDiskUsage(u: PodUsage, parts: DiskParts): DiskUsage {
  let total: DiskUsage = { bytes: 0, inodes: 0 };
  for (const c of u.containers) {
    if (parts.rootfs) total = add(total, c.rootfs);
    if (parts.logs) total = add(total, c.logs);
  }
  if (parts.volumes) for (const v of u.volumes.values()) total = add(total, v);
  return total;
}

/** The pod's ephemeral storage as the kubelet's summary totals it: writable layers, logs and
 * local volumes. */
export function podEphemeralStorage(u: PodUsage): number {
  return podDiskUsage(u, ALL_PARTS).bytes;
}
