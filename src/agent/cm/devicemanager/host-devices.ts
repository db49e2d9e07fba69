// Host devices, built in: one group of the agent config's hostDevices served in process as a
// device plugin endpoint, without gRPC. Its devices are the nodes its path patterns match now
// (host-device-scan.ts); a device's id is the path that matched ("/dev/ttyUSB0"), or
// "<path>#<n>" for each of the podsPerDevice shares of a node, and every listed device is
// healthy (a node that is gone is no longer listed). The group watches the folders its patterns
// name and rescans after a change; folders that do not exist yet are rescanned for on a timer.
// Allocate gives each distinct node at the path it matched, with "rwm" device cgroup access.
//
// Invariants: onDevices gets a list only when its ids differ from the last list given; one scan
// runs at a time; after close() no scan starts, no watch or timer is left and no callback is made.

import { type Clock, realClock } from "../../../util/clock.ts";
import { type Logger, nullLogger } from "../../../util/log.ts";
import type { HostDeviceGroupConfig } from "../../config/index.ts";
import {
  type HostDevice,
  type HostDeviceFs,
  nodeHostDeviceFs,
  scanHostDevices,
} from "./host-device-scan.ts";
import type {
  ContainerAllocation,
  DevicePluginEndpoint,
  PluginDevice,
  PluginOptions,
} from "./types.ts";

export interface HostDeviceGroupDeps {
  clock?: Clock;
  /** The file system, node's by default; tests replace parts (stat, to fake device nodes). */
  fs?: Partial<HostDeviceFs>;
  log?: Logger;
  /** Period of the rescans while a folder a pattern names is missing or cannot be watched (ms). */
  rescanMs?: number;
  /** Wait after a change in a watched folder before rescanning, so that a burst of changes
   * (a USB adapter adding its node and its by-id links) makes one scan (ms). */
  debounceMs?: number;
}

/** A host device group: a DevicePluginEndpoint whose scan tests can run. */
export interface HostDeviceEndpoint extends DevicePluginEndpoint {
  /** One scan (the group's iteration): updates the devices, the watches and the rescan timer,
   * gives the list to the watch callback when it changed, and returns it. Never rejects; scans
   * asked for while one runs follow it in turn. */
  rescan(): Promise<PluginDevice[]>;
}

export function createHostDeviceGroup(
  group: HostDeviceGroupConfig,
  deps: HostDeviceGroupDeps = {},
): HostDeviceEndpoint {
  return new HostDeviceGroup(group, deps);
}

class HostDeviceGroup implements HostDeviceEndpoint {
  readonly resourceName: string;
  readonly options: PluginOptions = {
    preStartRequired: false,
    getPreferredAllocationAvailable: false,
  };
  private readonly fs: HostDeviceFs;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly rescanMs: number;
  private readonly debounceMs: number;
  /** Each device id of the last scan → the node it stands for. */
  private byId = new Map<string, HostDevice>();
  /** The ids of the last list given to onDevices, joined; undefined before the first. */
  private lastListed: string | undefined;
  /** Set by watch(); cleared by close(). */
  private onDevices: ((devices: PluginDevice[]) => void) | undefined;
  /** The folders watched now, by path, with the inode watched. */
  private watches = new Map<string, { ino: number; stop: () => void }>();
  /** Folders whose watch could not start (logged once each). */
  private unwatchable = new Set<string>();
  /** The scan problems last logged, joined (each change is logged once). */
  private lastProblems = "";
  /** The last scan asked for; the next one starts when it ends. */
  private scans: Promise<unknown> = Promise.resolve();
  /** Cancels the debounce timer of a change seen; set while one is pending. */
  private cancelDebounce: (() => void) | undefined;
  /** Cancels the periodic rescan; set while one is pending. */
  private cancelRescan: (() => void) | undefined;
  private closed = false;

  constructor(
    private readonly group: HostDeviceGroupConfig,
    deps: HostDeviceGroupDeps,
  ) {
    this.resourceName = group.name;
    this.fs = { ...nodeHostDeviceFs, ...deps.fs };
    this.clock = deps.clock ?? realClock;
    this.log = (deps.log ?? nullLogger).with({ resource: group.name });
    this.rescanMs = deps.rescanMs ?? 2_000;
    this.debounceMs = deps.debounceMs ?? 100;
  }

  /** Scans at once, then after every change; `onEnd` is never called (the group lives as long
   * as the agent). */
  watch(onDevices: (devices: PluginDevice[]) => void, _onEnd: (error?: Error) => void): void {
    if (this.closed) return;
    this.onDevices = onDevices;
    void this.rescan();
  }

  rescan(): Promise<PluginDevice[]> {
    const run = this.scans.then(() => this.scanOnce());
    this.scans = run;
    return run;
  }

  private async scanOnce(): Promise<PluginDevice[]> {
    if (this.closed) return this.list();
    try {
      const scan = await scanHostDevices(this.group.paths, this.fs);
      if (this.closed) return this.list();
      this.byId = deviceIds(scan.devices, this.group.podsPerDevice);
      this.logProblems(scan.problems);
      const watches = this.updateWatches(scan.folders);
      this.scheduleRescan(scan.missing || watches.failed);
      // What changed in a folder between its read and the start of its watch is seen by one
      // more scan.
      if (watches.started) this.changed();
      const devices = this.list();
      const ids = devices.map((d) => d.id).join("\n");
      if (this.onDevices !== undefined && ids !== this.lastListed) {
        this.lastListed = ids;
        this.onDevices(devices);
      }
      return devices;
    } catch (err) {
      this.log.error("Host device scan failed", { error: err });
      this.scheduleRescan(true);
      return this.list();
    }
  }

  private list(): PluginDevice[] {
    return [...this.byId.keys()].map((id) => ({ id, healthy: true }));
  }

  /** Watches `folders` and stops the watches of others; says whether it started a watch, and
   * whether some folder could not be watched. */
  private updateWatches(folders: Map<string, number>): { started: boolean; failed: boolean } {
    for (const [dir, watch] of this.watches) {
      if (folders.get(dir) === watch.ino) continue;
      watch.stop();
      this.watches.delete(dir);
    }
    let started = false;
    let failed = false;
    for (const [dir, ino] of folders) {
      if (this.watches.has(dir)) continue;
      try {
        const entry = { ino, stop: () => {} };
        entry.stop = this.fs.watch(
          dir,
          () => this.changed(),
          () => this.watchDied(dir, entry),
        );
        this.watches.set(dir, entry);
        this.unwatchable.delete(dir);
        started = true;
      } catch (err) {
        failed = true;
        if (!this.unwatchable.has(dir))
          this.log.warn("Cannot watch a folder of host devices; rescanning it instead", {
            folder: dir,
            error: err,
          });
        this.unwatchable.add(dir);
      }
    }
    return { started, failed };
  }

  private watchDied(dir: string, entry: { stop: () => void }): void {
    if (this.watches.get(dir) !== entry) return;
    entry.stop();
    this.watches.delete(dir);
    this.changed();
  }

  /** A watched folder changed: rescan once the burst is over. */
  private changed(): void {
    if (this.closed || this.cancelDebounce !== undefined) return;
    this.cancelDebounce = this.clock.setTimer(this.debounceMs, () => {
      this.cancelDebounce = undefined;
      void this.rescan();
    });
  }

  private scheduleRescan(needed: boolean): void {
    if (!needed) {
      this.cancelRescan?.();
      this.cancelRescan = undefined;
      return;
    }
    if (this.cancelRescan !== undefined || this.closed) return;
    this.cancelRescan = this.clock.setTimer(this.rescanMs, () => {
      this.cancelRescan = undefined;
      void this.rescan();
    });
  }

  private logProblems(problems: string[]): void {
    const text = problems.join("\n");
    if (text === this.lastProblems) return;
    this.lastProblems = text;
    if (problems.length > 0) this.log.warn("Cannot read paths of host devices", { problems });
  }

  async allocate(deviceIds: string[], signal?: AbortSignal): Promise<ContainerAllocation> {
    signal?.throwIfAborted();
    const devices: ContainerAllocation["devices"] = [];
    const given = new Set<string>();
    for (const id of deviceIds) {
      const device = this.byId.get(id);
      if (device === undefined) {
        const known = [...this.byId.keys()];
        const now = known.length === 0 ? "none" : known.slice(0, 5).join(", ");
        throw new Error(
          `Cannot allocate host device ${JSON.stringify(id)} of ${JSON.stringify(this.resourceName)}: no such device now (devices: ${now}${known.length > 5 ? ", ..." : ""})`,
        );
      }
      if (given.has(device.path)) continue;
      given.add(device.path);
      devices.push({ containerPath: device.path, hostPath: device.hostPath, permissions: "rwm" });
    }
    return { envs: {}, mounts: [], devices, annotations: {}, cdiDevices: [] };
  }

  async preferredAllocation(): Promise<string[]> {
    throw new Error(
      `Host devices ${JSON.stringify(this.resourceName)} offer no GetPreferredAllocation`,
    );
  }

  async preStartContainer(): Promise<void> {
    throw new Error(`Host devices ${JSON.stringify(this.resourceName)} need no PreStartContainer`);
  }

  close(): void {
    this.closed = true;
    this.onDevices = undefined;
    this.cancelDebounce?.();
    this.cancelDebounce = undefined;
    this.cancelRescan?.();
    this.cancelRescan = undefined;
    for (const watch of this.watches.values()) watch.stop();
    this.watches.clear();
  }
}

/** Device id → node: the path itself, or one id per share when a node serves several pods. */
function deviceIds(devices: HostDevice[], podsPerDevice: number): Map<string, HostDevice> {
  const byId = new Map<string, HostDevice>();
  for (const device of devices) {
    if (podsPerDevice <= 1) byId.set(device.path, device);
    else for (let n = 0; n < podsPerDevice; n++) byId.set(`${device.path}#${n}`, device);
  }
  return byId;
}
