// The device manager's checkpoint: `kubelet_internal_checkpoint` in the device plugin folder, in
// the kubelet's shape ({"Data": {"PodDeviceEntries", "RegisteredDevices"}, "Checksum"}), except
// that AllocResp holds the container's allocation as JSON, and the checksum is the CRC-32 of the
// Data object's JSON text. Written atomically (temp file, fsync, rename, fsync of the folder).
// A file that cannot be read back (not JSON, wrong shape, wrong checksum) is reported and moved
// aside to `kubelet_internal_checkpoint.corrupt`: the manager then starts with no allocations
// rather than not at all.
import { readFileSync, renameSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { describeZodError } from "../../../protocol/decode.ts";
import { writeFileAtomic } from "../../../util/atomic-file.ts";
import { ignoreStateWrites, reportedWrite, type StateWrites } from "../../events/state-writes.ts";
import type { ContainerDevicesEntry } from "./types.ts";

export const CHECKPOINT_FILE = "kubelet_internal_checkpoint";

/** One container's devices of one resource, as checkpointed. */
export interface CheckpointEntry extends ContainerDevicesEntry {
  /** The same ids keyed by NUMA node ("-1" when the plugin gave none). */
  deviceIdsByNuma: Record<string, string[]>;
}

export interface DeviceCheckpoint {
  entries: CheckpointEntry[];
  /** Every device id each resource's plugin listed last (healthy or not). */
  registeredDevices: Record<string, string[]>;
}

/** What the manager starts from; `problem` says why a file present was not used. */
export interface CheckpointRead {
  checkpoint: DeviceCheckpoint;
  problem?: string;
}

const idsSchema = z.array(z.string().min(1));

const allocationSchema = z.object({
  envs: z.record(z.string(), z.string()),
  mounts: z.array(
    z.object({ containerPath: z.string(), hostPath: z.string(), readOnly: z.boolean() }),
  ),
  devices: z.array(
    z.object({ containerPath: z.string(), hostPath: z.string(), permissions: z.string() }),
  ),
  annotations: z.record(z.string(), z.string()),
  cdiDevices: z.array(z.string()),
});

const entrySchema = z.object({
  PodUID: z.string().min(1),
  ContainerName: z.string().min(1),
  ResourceName: z.string().min(1),
  DeviceIDs: z.record(z.string(), idsSchema),
  AllocResp: allocationSchema,
});

const dataSchema = z.object({
  PodDeviceEntries: z.array(entrySchema).nullable(),
  RegisteredDevices: z.record(z.string(), idsSchema.nullable()).nullable(),
});

const fileSchema = z.object({ Data: z.unknown(), Checksum: z.number().int() });

function checksum(dataText: string): number {
  return Bun.hash.crc32(dataText);
}

/** The file's text for `cp`. */
export function encodeCheckpoint(cp: DeviceCheckpoint): string {
  const data = {
    PodDeviceEntries: cp.entries.map((e) => ({
      PodUID: e.podUid,
      ContainerName: e.containerName,
      ResourceName: e.resourceName,
      DeviceIDs: e.deviceIdsByNuma,
      AllocResp: e.allocation,
    })),
    RegisteredDevices: cp.registeredDevices,
  };
  const dataText = JSON.stringify(data);
  return `{"Data":${dataText},"Checksum":${checksum(dataText)}}\n`;
}

/** Every id of an entry's NUMA map once, in the order written. */
function flatIds(byNuma: Record<string, string[]>): string[] {
  return [...new Set(Object.values(byNuma).flat())];
}

/** Parses a checkpoint's text; throws an Error saying what is wrong with it. */
export function decodeCheckpoint(text: string): DeviceCheckpoint {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new Error(`it is not JSON (${(err as Error).message})`);
  }
  const file = fileSchema.safeParse(raw);
  if (!file.success) throw new Error(`it has the wrong shape: ${describeZodError(file.error)}`);
  const sum = checksum(JSON.stringify(file.data.Data));
  if (sum !== file.data.Checksum)
    throw new Error(`its checksum ${file.data.Checksum} does not match its data (${sum})`);
  const data = dataSchema.safeParse(file.data.Data);
  if (!data.success)
    throw new Error(`it has the wrong shape: Data.${describeZodError(data.error)}`);
  const registeredDevices: Record<string, string[]> = {};
  for (const [name, ids] of Object.entries(data.data.RegisteredDevices ?? {}))
    registeredDevices[name] = ids ?? [];
  return {
    entries: (data.data.PodDeviceEntries ?? []).map((e) => ({
      podUid: e.PodUID,
      containerName: e.ContainerName,
      resourceName: e.ResourceName,
      deviceIds: flatIds(e.DeviceIDs),
      deviceIdsByNuma: e.DeviceIDs,
      allocation: e.AllocResp,
    })),
    registeredDevices,
  };
}

const empty = (): DeviceCheckpoint => ({ entries: [], registeredDevices: {} });

/** Reads the checkpoint in `dir`: empty when there is none; when it cannot be used, empty with
 * the problem, the file moved aside to `<name>.corrupt`. Never throws. */
export function readCheckpoint(dir: string): CheckpointRead {
  const path = join(dir, CHECKPOINT_FILE);
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return { checkpoint: empty() };
    return {
      checkpoint: empty(),
      problem: `cannot read device checkpoint ${path}: ${(err as Error).message}`,
    };
  }
  try {
    return { checkpoint: decodeCheckpoint(text) };
  } catch (err) {
    const why = `device checkpoint ${path} cannot be used: ${(err as Error).message}`;
    return { checkpoint: empty(), problem: `${why}; ${moveAside(path)}` };
  }
}

function moveAside(path: string): string {
  const aside = `${path}.corrupt`;
  try {
    renameSync(path, aside);
    return `moved to ${aside}, starting with no allocations`;
  } catch (err) {
    return `could not move it to ${aside} (${(err as Error).message}), starting with no allocations`;
  }
}

/** Writes `cp` to the checkpoint in `dir` (mode 0644, as the kubelet); throws when it cannot,
 * after saying so to `writes`. */
export function writeCheckpoint(
  dir: string,
  cp: DeviceCheckpoint,
  writes: StateWrites = ignoreStateWrites,
): void {
  const path = join(dir, CHECKPOINT_FILE);
  const text = encodeCheckpoint(cp);
  reportedWrite(writes, path, () => writeFileAtomic(path, text, { mode: 0o644, dirMode: 0o755 }));
}
