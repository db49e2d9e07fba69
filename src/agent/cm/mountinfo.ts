// Which cgroup hierarchies the host has, read from /proc/self/mountinfo (as runc and kubelet
// decide): a cgroup2 mount at the cgroup root means the unified (v2) layout; otherwise every
// v1 hierarchy ("cgroup" mounts) is listed by the controllers it carries. A hybrid host (v1
// controllers plus a cgroup2 mount with none) is a v1 host.

export type CgroupLayout =
  | { version: 2; mountPoint: string }
  | {
      version: 1;
      /** Controller (or "name=systemd") → its hierarchy's mount point. */
      controllers: Map<string, string>;
      /** A hybrid host's cgroup2 mount (runtimes make their cgroups there too). */
      unified?: string;
    };

export interface MountEntry {
  /** The filesystem's device number, "major:minor" (the same for every mount of it). */
  id: string;
  /** The folder of the filesystem that is mounted ("/" unless a bind mount of a subfolder). */
  root: string;
  mountPoint: string;
  fsType: string;
  /** The mount source ("/dev/sda1", "tmpfs"). */
  source: string;
  superOptions: string[];
}

/** The mount lines of a mountinfo text; malformed lines are skipped. */
export function parseMountinfo(text: string): MountEntry[] {
  const out: MountEntry[] = [];
  for (const line of text.split("\n")) {
    const fields = line.trim().split(" ");
    const dash = fields.indexOf("-");
    if (dash < 6 || fields.length < dash + 4) continue;
    out.push({
      id: fields[2] ?? "",
      root: unescapeOctal(fields[3] ?? ""),
      mountPoint: unescapeOctal(fields[4] ?? ""),
      fsType: fields[dash + 1] ?? "",
      source: unescapeOctal(fields[dash + 2] ?? ""),
      superOptions: (fields[dash + 3] ?? "").split(","),
    });
  }
  return out;
}

/** mountinfo escapes space, tab, newline and backslash as octal. */
function unescapeOctal(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_, oct: string) =>
    String.fromCharCode(Number.parseInt(oct, 8)),
  );
}

const V1_OPTIONS_IGNORED = new Set(["rw", "ro", "relatime", "noexec", "nosuid", "nodev"]);

/**
 * The layout of the host's cgroups, or an error naming what was found. `unifiedRoot` is where a
 * unified host mounts cgroup2 (default /sys/fs/cgroup).
 */
export function detectCgroupLayout(
  mountinfo: string,
  unifiedRoot = "/sys/fs/cgroup",
): CgroupLayout {
  const mounts = parseMountinfo(mountinfo);
  const v1 = mounts.filter((m) => m.fsType === "cgroup");
  if (v1.length === 0) {
    const v2 = mounts.find((m) => m.fsType === "cgroup2" && m.mountPoint === unifiedRoot);
    const anyV2 = v2 ?? mounts.find((m) => m.fsType === "cgroup2");
    if (anyV2 !== undefined) return { version: 2, mountPoint: anyV2.mountPoint };
    throw new Error("no cgroup hierarchy is mounted (no cgroup or cgroup2 line in mountinfo)");
  }
  const controllers = new Map<string, string>();
  for (const m of v1) {
    for (const opt of m.superOptions) {
      if (V1_OPTIONS_IGNORED.has(opt) || opt.startsWith("release_agent=")) continue;
      if (opt === "xattr" || opt === "noprefix" || opt === "clone_children") continue;
      if (!controllers.has(opt)) controllers.set(opt, m.mountPoint);
    }
  }
  const unified = mounts.find((m) => m.fsType === "cgroup2")?.mountPoint;
  return unified === undefined ? { version: 1, controllers } : { version: 1, controllers, unified };
}
