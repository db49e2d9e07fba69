// The systemd cgroup driver: every cgroup the agent makes (kubepods, the QoS levels, one per pod)
// is a transient slice that systemd owns, made, changed and removed over D-Bus; the files of a
// slice are read and written by the cgroupfs driver of the same version, given the slices' paths.
// docs/systemd-cgroup-driver.md says why and how, with the names and properties.
//
// Invariants: a limit is set as a unit property before it is written to a file, so that systemd,
// which writes the files again from the properties (on daemon-reload among other times), keeps
// it; the agent never makes a container's scope (the runtime's runc does).
import { DBusError } from "../../util/dbus/connection.ts";
import { UNIT_EXISTS } from "../../util/dbus/systemd-manager.ts";
import {
  cpuQuotaPerSecUSec,
  UNLIMITED,
  type UnitProperty,
  unitProperty,
} from "../../util/dbus/unit-properties.ts";
import type { CgroupManager, CgroupStats, ResourceConfig } from "./cgroup.ts";
import { sharesToWeightLinear } from "./convert.ts";
import { parseCpuSet } from "./cpuset.ts";
import { cgroupNameOfSlice, sliceName } from "./systemd-names.ts";

/** What the driver asks of systemd (systemd-connect.ts gives it, reconnecting as needed). */
export interface SystemdUnits {
  /** systemd's version number (252 for "252.30-1~deb12u2"). */
  readonly version: number;
  startTransientUnit(name: string, properties: UnitProperty[]): Promise<void>;
  setUnitProperties(name: string, properties: UnitProperty[]): Promise<void>;
  stopUnit(name: string): Promise<void>;
  resetFailedUnit(name: string): Promise<void>;
  close(): void;
}

export interface CgroupSystemdOptions {
  /** The cgroupfs driver of the host's cgroup version, made with the slices' literal names. */
  files: CgroupManager;
  systemd: SystemdUnits;
}

/** systemd 242 added CPUQuotaPeriodUSec; 244 added AllowedCPUs. */
const QUOTA_PERIOD_SINCE = 242;
const ALLOWED_CPUS_SINCE = 244;

export function createCgroupSystemd(opts: CgroupSystemdOptions): CgroupManager & {
  close(): void;
} {
  return new CgroupSystemd(opts.files, opts.systemd);
}

class CgroupSystemd implements CgroupManager {
  readonly version: 1 | 2;

  constructor(
    private readonly files: CgroupManager,
    private readonly systemd: SystemdUnits,
  ) {
    this.version = files.version;
  }

  literalName(name: string): string {
    return this.files.literalName(name);
  }

  paths(name: string): string[] {
    return this.files.paths(name);
  }

  exists(name: string): Promise<boolean> {
    return this.files.exists(name);
  }

  /** Starts the slice (an existing one, left by an earlier run, is taken as made and given the
   * limits), then makes what systemd leaves to the driver and writes the files. */
  async create(name: string, config: ResourceConfig): Promise<void> {
    const unit = sliceName(name);
    const parent = sliceName(parentName(name));
    const properties = [
      unitProperty("Description", `fleetlet cgroup ${name}`),
      ...(parent === "-.slice" ? [] : [unitProperty("Wants", [parent])]),
      unitProperty("DefaultDependencies", false),
      unitProperty("MemoryAccounting", true),
      unitProperty("CPUAccounting", true),
      unitProperty("IOAccounting", true),
      unitProperty("TasksAccounting", true),
      ...this.limits(config),
    ];
    try {
      await this.systemd.startTransientUnit(unit, properties);
    } catch (err) {
      if (!(err instanceof DBusError && err.errorName === UNIT_EXISTS)) throw err;
      await this.systemd.setUnitProperties(unit, this.limits(config));
    }
    await this.files.create(name, config);
  }

  async update(name: string, config: ResourceConfig): Promise<void> {
    await this.systemd.setUnitProperties(sliceName(name), this.limits(config));
    await this.files.update(name, config);
  }

  stats(name: string): Promise<CgroupStats> {
    return this.files.stats(name);
  }

  pids(name: string): Promise<number[]> {
    return this.files.pids(name);
  }

  kill(name: string): Promise<void> {
    return this.files.kill(name);
  }

  /** Stops the slice (and every unit in it), forgets it if it failed, and removes what is left
   * of its directories (on v1, those in the hierarchies systemd does not manage). */
  async destroy(name: string): Promise<void> {
    const unit = sliceName(name);
    await this.systemd.stopUnit(unit);
    await this.systemd.resetFailedUnit(unit);
    await this.files.destroy(name);
  }

  /** The child slices' last levels ("kubepods-burstable-pod12_ab.slice" → "pod12-ab"); the
   * runtime's container scopes are not cgroups of the agent's. */
  async children(name: string): Promise<string[]> {
    const out: string[] = [];
    for (const child of await this.files.children(name)) {
      if (!child.endsWith(".slice")) continue;
      try {
        const childName = cgroupNameOfSlice(child);
        out.push(childName.slice(childName.lastIndexOf("/") + 1));
      } catch {
        // not a slice name the driver makes
      }
    }
    return out;
  }

  close(): void {
    this.systemd.close();
  }

  /** The unit properties of `c`'s set fields, as runc's systemd managers write them. */
  private limits(c: ResourceConfig): UnitProperty[] {
    const v2 = this.version === 2;
    const out: UnitProperty[] = [];
    if (c.memory !== undefined) {
      const bytes = c.memory > 0 ? BigInt(c.memory) : UNLIMITED;
      out.push(unitProperty(v2 ? "MemoryMax" : "MemoryLimit", bytes));
    }
    if (c.cpuShares !== undefined) {
      out.push(
        v2
          ? unitProperty("CPUWeight", BigInt(sharesToWeightLinear(c.cpuShares)))
          : unitProperty("CPUShares", BigInt(c.cpuShares)),
      );
    }
    out.push(...this.quota(c));
    if (c.pidsLimit !== undefined)
      out.push(unitProperty("TasksMax", c.pidsLimit > 0 ? BigInt(c.pidsLimit) : UNLIMITED));
    if (c.cpusetCpus !== undefined && v2 && this.systemd.version >= ALLOWED_CPUS_SINCE)
      out.push(unitProperty("AllowedCPUs", cpuMask(c.cpusetCpus)));
    return out;
  }

  private quota(c: ResourceConfig): UnitProperty[] {
    if (c.cpuQuota === undefined && c.cpuPeriod === undefined) return [];
    const period = c.cpuPeriod !== undefined && c.cpuPeriod > 0 ? c.cpuPeriod : undefined;
    const out: UnitProperty[] = [];
    if (period !== undefined && this.systemd.version >= QUOTA_PERIOD_SINCE)
      out.push(unitProperty("CPUQuotaPeriodUSec", BigInt(period)));
    out.push(unitProperty("CPUQuotaPerSecUSec", cpuQuotaPerSecUSec(c.cpuQuota ?? 0, period)));
    return out;
  }
}

/** "/kubepods/burstable" → "/kubepods"; "/kubepods" → "/". */
function parentName(name: string): string {
  const trimmed = name.replace(/\/+$/, "");
  return trimmed.slice(0, trimmed.lastIndexOf("/")) || "/";
}

/** A cpuset list ("0-2,5") as systemd's AllowedCPUs bitmask: CPU n is bit n % 8 of byte n / 8. */
export function cpuMask(list: string): number[] {
  const cpus = parseCpuSet(list);
  const bytes = new Array<number>(cpus.length === 0 ? 0 : Math.floor(Math.max(...cpus) / 8) + 1);
  bytes.fill(0);
  for (const cpu of cpus) bytes[cpu >> 3] = (bytes[cpu >> 3] ?? 0) | (1 << (cpu & 7));
  return bytes;
}
