// Reads the device's health facts from /proc and /sys (docs/protocol.md, "Device health"). Every
// path is under an injected root folder, so tests run against a fake tree; filesystem use and
// interface addresses come through injected functions for the same reason. A fact the board
// does not give (no thermal zone, no Raspberry Pi firmware) is left out; nothing here throws.
import { readdirSync, readFileSync, statfsSync } from "node:fs";
import { networkInterfaces } from "node:os";
import { join } from "node:path";
import {
  type DeviceHealth,
  type FilesystemUse,
  type NetworkInterface,
  THROTTLED_FLAGS,
} from "../../protocol/health.ts";
import { type MountEntry, parseMountinfo } from "../cm/mountinfo.ts";

interface StatfsResult {
  bsize: number;
  blocks: number;
  bfree: number;
  bavail: number;
}

export interface CollectorDeps {
  /** The folder that holds proc/ and sys/: "/" on a device, a temp folder in tests. */
  root: string;
  /** Folders whose filesystem is always reported (the agent's root dir, the image filesystem),
   * even when it is of a kind skipped otherwise. */
  paths: readonly string[];
  statfs(path: string): StatfsResult | undefined;
  /** Addresses by interface name ("192.168.1.7/24"). */
  addresses(): Map<string, string[]>;
}

/** Filesystem kinds that hold no storage of the device's. */
const PSEUDO_FS = new Set(
  (
    "proc sysfs devtmpfs devpts tmpfs cgroup cgroup2 securityfs debugfs tracefs configfs fusectl " +
    "mqueue hugetlbfs pstore bpf autofs binfmt_misc nsfs rpc_pipefs efivarfs ramfs squashfs " +
    "overlay fuse.lxcfs selinuxfs"
  ).split(" "),
);
/** Mount points under these are the system's or containers' own, never a device's storage. */
const SKIPPED_UNDER = ["/proc", "/sys", "/dev", "/run"];

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
}

function list(path: string): string[] {
  try {
    return readdirSync(path).sort();
  } catch {
    return [];
  }
}

function readTemperatures(root: string): DeviceHealth["temperatures"] {
  const base = join(root, "sys/class/thermal");
  const out: DeviceHealth["temperatures"] = [];
  for (const zone of list(base).filter((n) => n.startsWith("thermal_zone"))) {
    const milli = Number.parseInt(readText(join(base, zone, "temp")) ?? "", 10);
    if (!Number.isFinite(milli) || milli < -273_150 || milli > 1_000_000) continue;
    const type = (readText(join(base, zone, "type")) ?? "").trim().slice(0, 256);
    out.push({ zone: zone.slice(0, 256), type, celsius: milli / 1000 });
    if (out.length === 64) break;
  }
  return out;
}

/** Decodes the firmware's get_throttled word (hex, with or without 0x). */
export function decodeThrottled(text: string): DeviceHealth["throttled"] {
  const t = text.trim().replace(/^0x/i, "");
  if (!/^[0-9a-f]{1,8}$/i.test(t)) return undefined;
  const raw = Number.parseInt(t, 16);
  const flags = THROTTLED_FLAGS.filter(([bit]) => (raw & (1 << bit)) !== 0).map(([, n]) => n);
  return { raw, flags };
}

function readThrottled(root: string): DeviceHealth["throttled"] {
  const text = readText(join(root, "sys/devices/platform/soc/soc:firmware/get_throttled"));
  return text === undefined ? undefined : decodeThrottled(text);
}

function readLoad(root: string): DeviceHealth["load"] {
  const parts = (readText(join(root, "proc/loadavg")) ?? "").split(" ").slice(0, 3).map(Number);
  if (parts.length !== 3 || parts.some((n) => !Number.isFinite(n) || n < 0)) return undefined;
  return [parts[0] ?? 0, parts[1] ?? 0, parts[2] ?? 0];
}

function readBoot(root: string): Pick<DeviceHealth, "bootTime" | "uptimeSeconds"> {
  const uptime = Number.parseFloat(readText(join(root, "proc/uptime")) ?? "");
  const btime = /^btime (\d+)$/m.exec(readText(join(root, "proc/stat")) ?? "")?.[1];
  return {
    ...(uptime >= 0 && uptime <= Number.MAX_SAFE_INTEGER && { uptimeSeconds: uptime }),
    ...(btime !== undefined &&
      Number.isSafeInteger(Number(btime) * 1000) && { bootTime: Number(btime) * 1000 }),
  };
}

function isUnder(path: string, dir: string): boolean {
  return dir === "/" || path === dir || path.startsWith(`${dir}/`);
}

/** The real mounts (one per filesystem, bind mounts of subfolders left out), and the mount
 * holding each of `paths`. */
export function pickMounts(mounts: readonly MountEntry[], paths: readonly string[]): MountEntry[] {
  const picked = new Map<string, MountEntry>();
  for (const m of mounts) {
    if (PSEUDO_FS.has(m.fsType) || m.root !== "/") continue;
    if (SKIPPED_UNDER.some((d) => isUnder(m.mountPoint, d))) continue;
    if (!picked.has(m.id)) picked.set(m.id, m);
  }
  const out = [...picked.values()];
  for (const path of paths) {
    let best: MountEntry | undefined;
    for (const m of mounts)
      if (isUnder(path, m.mountPoint) && m.mountPoint.length >= (best?.mountPoint.length ?? -1))
        best = m;
    if (best !== undefined && !out.some((m) => m.mountPoint === best.mountPoint)) out.push(best);
  }
  return out.slice(0, 64);
}

function readFilesystems(deps: CollectorDeps): FilesystemUse[] {
  const mounts = pickMounts(
    parseMountinfo(readText(join(deps.root, "proc/self/mountinfo")) ?? ""),
    deps.paths,
  );
  const out: FilesystemUse[] = [];
  for (const m of mounts) {
    const s = deps.statfs(m.mountPoint);
    if (s === undefined || s.blocks <= 0) continue;
    const safe = (n: number) => Math.min(Number.MAX_SAFE_INTEGER, Math.max(0, n));
    const totalBytes = safe(s.blocks * s.bsize);
    out.push({
      mountpoint: m.mountPoint,
      device: m.source,
      fsType: m.fsType,
      totalBytes,
      usedBytes: safe((s.blocks - s.bfree) * s.bsize),
      availableBytes: safe(s.bavail * s.bsize),
    });
  }
  return out;
}

const PRE_EOL = { 1: "normal", 2: "warning", 3: "urgent" } as const;

/** eMMC wear, where the card says (mmcblk*: life_time "0x01 0x02", pre_eol_info "0x01"). */
function readStorage(root: string): NonNullable<DeviceHealth["storage"]> {
  const base = join(root, "sys/block");
  const out: NonNullable<DeviceHealth["storage"]> = [];
  for (const device of list(base)
    .filter((n) => /^mmcblk\d+$/.test(n))
    .slice(0, 16)) {
    const life = (readText(join(base, device, "device/life_time")) ?? "")
      .trim()
      .split(/\s+/)
      .map((v) => Number.parseInt(v, 16))
      .filter((v) => Number.isInteger(v) && v >= 1 && v <= 11);
    const eol = Number.parseInt(readText(join(base, device, "device/pre_eol_info")) ?? "", 16);
    if (life.length === 0 && !Number.isInteger(eol)) continue;
    out.push({
      device,
      ...(life.length > 0 && { lifeUsedPercent: Math.max(...life) * 10 }),
      ...(Number.isInteger(eol) && {
        preEol: PRE_EOL[eol as keyof typeof PRE_EOL] ?? "undefined",
      }),
    });
  }
  return out;
}

function readCounter(path: string): number | undefined {
  const n = Number((readText(path) ?? "").trim());
  return Number.isSafeInteger(n) && n >= 0 ? n : undefined;
}

/** Interfaces from /sys/class/net, but the loopback and containers' veth ends. */
function readInterfaces(deps: CollectorDeps): NetworkInterface[] {
  const base = join(deps.root, "sys/class/net");
  const addresses = deps.addresses();
  const out: NetworkInterface[] = [];
  for (const name of list(base)) {
    if (name === "lo" || name.startsWith("veth") || name.length > 256) continue;
    const state = readText(join(base, name, "operstate"))
      ?.trim()
      .slice(0, 32);
    const rx = readCounter(join(base, name, "statistics/rx_bytes"));
    const tx = readCounter(join(base, name, "statistics/tx_bytes"));
    out.push({
      name,
      ...(state !== undefined && { state }),
      addresses: (addresses.get(name) ?? []).slice(0, 64),
      ...(rx !== undefined && { rxBytes: rx }),
      ...(tx !== undefined && { txBytes: tx }),
    });
    if (out.length === 64) break;
  }
  return out;
}

/** Reads every fact once. */
export function collectHealth(deps: CollectorDeps, now: number): DeviceHealth {
  const throttled = readThrottled(deps.root);
  const load = readLoad(deps.root);
  const storage = readStorage(deps.root);
  return {
    collectedAt: Math.max(0, Math.round(now)),
    ...readBoot(deps.root),
    ...(load !== undefined && { load }),
    temperatures: readTemperatures(deps.root),
    ...(throttled !== undefined && { throttled }),
    filesystems: readFilesystems(deps),
    ...(storage.length > 0 && { storage }),
    interfaces: readInterfaces(deps),
  };
}

/** The device's own: statfs(2) and the runtime's interface list. */
export function hostCollectorDeps(paths: readonly string[]): CollectorDeps {
  return {
    root: "/",
    paths,
    statfs(path) {
      try {
        return statfsSync(path);
      } catch {
        return undefined;
      }
    },
    addresses() {
      const out = new Map<string, string[]>();
      for (const [name, list] of Object.entries(networkInterfaces()))
        out.set(
          name,
          (list ?? []).map((a) => a.cidr ?? a.address),
        );
      return out;
    },
  };
}
