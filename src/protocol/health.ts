// The device health an agent reports in its `health` message (docs/protocol.md, "Device
// health"): facts read from the device's /proc and /sys, each optional where a board does not
// say. Lists are bounded so that one message stays small.
import { z } from "zod";

const bytes = z.number().min(0).max(Number.MAX_SAFE_INTEGER);
const name = z.string().min(1).max(256);

/** The Raspberry Pi firmware's throttled flags, by bit (get_throttled). */
export const THROTTLED_FLAGS: readonly (readonly [number, string])[] = [
  [0, "under-voltage"],
  [1, "arm-frequency-capped"],
  [2, "throttled"],
  [3, "soft-temp-limit"],
  [16, "under-voltage-occurred"],
  [17, "arm-frequency-capped-occurred"],
  [18, "throttled-occurred"],
  [19, "soft-temp-limit-occurred"],
];

const temperatureSchema = z.object({
  /** The thermal zone's folder name, e.g. "thermal_zone0". */
  zone: name,
  /** What the zone measures (its `type` file), e.g. "cpu-thermal". */
  type: z.string().max(256),
  celsius: z.number().min(-273.15).max(1000),
});

const throttledSchema = z.object({
  /** The firmware's word as read. */
  raw: z.int().min(0).max(0xffffffff),
  /** The names of the bits set (THROTTLED_FLAGS; unknown bits are only in raw). */
  flags: z.array(z.string().max(64)).max(32),
});

const filesystemSchema = z.object({
  mountpoint: z.string().min(1).max(4096),
  device: z.string().max(4096),
  fsType: z.string().max(64),
  totalBytes: bytes,
  usedBytes: bytes,
  availableBytes: bytes,
});

const storageSchema = z.object({
  /** The block device, e.g. "mmcblk0". */
  device: name,
  /** eMMC life used, in % (the worse of the device's two estimates, 10 % steps); 100 = past. */
  lifeUsedPercent: z.int().min(0).max(110).optional(),
  /** eMMC pre-EOL state of its reserved blocks. */
  preEol: z.enum(["normal", "warning", "urgent", "undefined"]).optional(),
});

const interfaceSchema = z.object({
  name,
  /** "up", "down", … (operstate). */
  state: z.string().max(32).optional(),
  /** Addresses with their prefix length, e.g. "192.168.1.7/24". */
  addresses: z.array(z.string().max(64)).max(64),
  rxBytes: bytes.optional(),
  txBytes: bytes.optional(),
});

export const deviceHealthSchema = z.object({
  /** The agent's wall clock when the facts were read (ms since the epoch). */
  collectedAt: z.int().min(0).max(Number.MAX_SAFE_INTEGER),
  /** When the device booted (ms since the epoch, /proc/stat btime). */
  bootTime: z.int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
  uptimeSeconds: z.number().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
  /** Load averages over 1, 5 and 15 minutes. */
  load: z.tuple([z.number().min(0), z.number().min(0), z.number().min(0)]).optional(),
  temperatures: z.array(temperatureSchema).max(64),
  throttled: throttledSchema.optional(),
  filesystems: z.array(filesystemSchema).max(64),
  storage: z.array(storageSchema).max(16).optional(),
  interfaces: z.array(interfaceSchema).max(64),
});

export type DeviceHealth = z.output<typeof deviceHealthSchema>;
export type FilesystemUse = z.output<typeof filesystemSchema>;
export type NetworkInterface = z.output<typeof interfaceSchema>;
