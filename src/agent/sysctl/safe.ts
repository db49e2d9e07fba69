// The safe sysctls: isolated per pod by a kernel namespace and without influence on other pods,
// so that any pod may set them (the kubelet's list of 1.32). Some became namespaced only in a
// given kernel release and are safe only from it on; the running kernel's release is read from
// /proc/sys/kernel/osrelease, and if it cannot be read or parsed, those are left out.

interface SafeSysctl {
  name: string;
  /** The first kernel release (major, minor) where the sysctl is namespaced. */
  kernel?: readonly [number, number];
}

export const SAFE_SYSCTLS: readonly SafeSysctl[] = [
  { name: "kernel.shm_rmid_forced" },
  { name: "net.ipv4.ip_local_port_range" },
  { name: "net.ipv4.tcp_syncookies" },
  { name: "net.ipv4.ping_group_range" },
  { name: "net.ipv4.ip_unprivileged_port_start" },
  { name: "net.ipv4.ip_local_reserved_ports", kernel: [3, 16] },
  { name: "net.ipv4.tcp_keepalive_time", kernel: [4, 5] },
  { name: "net.ipv4.tcp_fin_timeout", kernel: [4, 6] },
  { name: "net.ipv4.tcp_keepalive_intvl", kernel: [4, 5] },
  { name: "net.ipv4.tcp_keepalive_probes", kernel: [4, 5] },
  { name: "net.ipv4.tcp_rmem", kernel: [4, 15] },
  { name: "net.ipv4.tcp_wmem", kernel: [4, 15] },
];

/** Where the running kernel's release is. */
export const KERNEL_RELEASE_FILE = "/proc/sys/kernel/osrelease";

/**
 * The numeric components of a kernel release ("6.1.0-28-amd64" → [6, 1, 0]), or undefined when
 * it does not start with at least "major.minor".
 */
export function parseKernelRelease(text: string): number[] | undefined {
  const m = /^\s*v?(\d+(?:\.\d+)+)/.exec(text);
  if (m?.[1] === undefined) return undefined;
  return m[1].split(".").map(Number);
}

/** Whether release `v` is `min` or later. */
function atLeast(v: readonly number[], min: readonly number[]): boolean {
  for (let i = 0; i < Math.max(v.length, min.length); i++) {
    const a = v[i] ?? 0;
    const b = min[i] ?? 0;
    if (a !== b) return a > b;
  }
  return true;
}

/** The safe sysctls on a kernel of release `kernel` (undefined: unknown), and those left out. */
export function safeSysctls(kernel: readonly number[] | undefined): {
  safe: string[];
  tooOld: string[];
} {
  const safe: string[] = [];
  const tooOld: string[] = [];
  for (const s of SAFE_SYSCTLS) {
    if (s.kernel === undefined || (kernel !== undefined && atLeast(kernel, s.kernel)))
      safe.push(s.name);
    else tooOld.push(s.name);
  }
  return { safe, tooOld };
}
