// The device manager's resources: for each extended resource, its devices as its endpoint last
// listed them and the endpoint serving it, with the kubelet's rules for a plugin that goes away
// (its devices turn unhealthy; the resource is dropped after the grace period unless an endpoint
// registers again).
// Invariants: a resource has at most one live endpoint; lists and the end of a replaced endpoint
// are ignored; a resource with a live endpoint never expires.
import type { Logger } from "../../../util/log.ts";
import type { ResourceStatus } from "./prepare.ts";
import type { DevicePluginEndpoint, PluginDevice, PluginOptions } from "./types.ts";

/** One resource's state. */
interface ResourceState {
  /** Devices as last listed, by id; from the checkpoint, every id unhealthy until listed. */
  devices: Map<string, PluginDevice>;
  /** The endpoint serving it; undefined once its stream ended, or before one registered. */
  endpoint?: DevicePluginEndpoint;
  /** Whether `endpoint` has sent its first list. */
  listed: boolean;
  /** The last endpoint's options; undefined when none registered since the agent started. */
  options?: PluginOptions;
  /** When it is dropped unless an endpoint registers; undefined while an endpoint is live. */
  expiresAt?: number;
}

/** What changed, for the manager to act on. */
interface ResourceEvents {
  /** A list arrived: `idsChanged` when the set of ids differs from the one before, `changed`
   * when ids or health did (or it is the endpoint's first list). */
  listed(name: string, change: { idsChanged: boolean; changed: boolean }): void;
  /** An endpoint came or went. */
  endpointChanged(name: string): void;
}

export interface DeviceResourcesDeps {
  logger: Logger;
  now(): number;
  /** How long a resource whose endpoint ended stays in the table. */
  gracePeriodMs: number;
  /** Resources known before any list (host device groups): capacity 0 until listed. */
  known: ReadonlySet<string>;
  events: ResourceEvents;
}

export class DeviceResources {
  /** Resources by name. */
  private readonly table = new Map<string, ResourceState>();
  private readonly logger: Logger;

  constructor(private readonly deps: DeviceResourcesDeps) {
    this.logger = deps.logger;
  }

  /** Makes resources of the checkpoint known, their devices unhealthy, until `expiresAt`. */
  restore(registered: Record<string, string[]>, expiresAt: number): void {
    for (const [name, ids] of Object.entries(registered)) {
      const devices = new Map(ids.map((id) => [id, { id, healthy: false }]));
      this.table.set(name, { devices, listed: false, expiresAt });
    }
  }

  /** Serves `endpoint`'s resource from now on; an endpoint serving it before is closed. */
  add(endpoint: DevicePluginEndpoint): void {
    const name = endpoint.resourceName;
    const r: ResourceState = this.table.get(name) ?? { devices: new Map(), listed: false };
    this.table.set(name, r);
    const old = r.endpoint;
    Object.assign(r, { endpoint, listed: false, options: endpoint.options, expiresAt: undefined });
    if (old !== undefined) this.closeQuietly(old);
    this.logger.info("Device plugin registered", { resource: name, replaced: old !== undefined });
    try {
      endpoint.watch(
        (devices) => this.onList(endpoint, devices),
        (error) => this.onEnd(endpoint, error),
      );
    } catch (err) {
      this.onEnd(endpoint, err as Error);
    }
    this.deps.events.endpointChanged(name);
  }

  status(name: string): ResourceStatus {
    const r = this.table.get(name);
    if (r?.endpoint !== undefined && r.listed) return { served: r.devices, endpoint: r.endpoint };
    return r !== undefined || this.deps.known.has(name) ? "known" : "unknown";
  }

  /** Devices of a resource as last listed (none for a resource not in the table). */
  devices(name: string): ReadonlyMap<string, PluginDevice> {
    return this.table.get(name)?.devices ?? new Map();
  }

  /** The live endpoint of a resource, and the options of the last one. */
  endpointOf(name: string): { endpoint?: DevicePluginEndpoint; options?: PluginOptions } {
    const r = this.table.get(name);
    return { endpoint: r?.endpoint, options: r?.options };
  }

  /** Drops resources whose grace period ended by `now`; their names. */
  expire(now: number): string[] {
    const dropped: string[] = [];
    for (const [name, r] of [...this.table]) {
      if (r.endpoint !== undefined || r.expiresAt === undefined || r.expiresAt > now) continue;
      this.table.delete(name);
      this.logger.warn("Device plugin did not come back: resource dropped", { resource: name });
      dropped.push(name);
    }
    return dropped;
  }

  /** Every resource name, known or in the table, sorted. */
  names(): string[] {
    return [...new Set([...this.deps.known, ...this.table.keys()])].sort();
  }

  /** Per resource: every device (capacity) or the healthy ones (allocatable). */
  counts(healthyOnly: boolean): Record<string, number> {
    const out: Record<string, number> = {};
    for (const name of this.deps.known) out[name] = 0;
    for (const [name, r] of this.table)
      out[name] = healthyOnly ? healthyCount(r.devices) : r.devices.size;
    return out;
  }

  /** Every id each resource listed last, for the checkpoint. */
  registeredDevices(): Record<string, string[]> {
    const out: Record<string, string[]> = {};
    for (const [name, r] of this.table) out[name] = [...r.devices.keys()];
    return out;
  }

  private onList(endpoint: DevicePluginEndpoint, devices: PluginDevice[]): void {
    const name = endpoint.resourceName;
    const r = this.table.get(name);
    if (r?.endpoint !== endpoint) return;
    const before = r.devices;
    r.devices = new Map(devices.map((d) => [d.id, { ...d }]));
    const first = !r.listed;
    r.listed = true;
    const idsChanged = before.size !== r.devices.size || devices.some((d) => !before.has(d.id));
    const healthChanged = devices.some((d) => before.get(d.id)?.healthy !== d.healthy);
    this.deps.events.listed(name, { idsChanged, changed: first || idsChanged || healthChanged });
  }

  private onEnd(endpoint: DevicePluginEndpoint, error?: Error): void {
    const name = endpoint.resourceName;
    const r = this.table.get(name);
    if (r?.endpoint !== endpoint) return;
    r.endpoint = undefined;
    r.listed = false;
    for (const d of r.devices.values()) d.healthy = false;
    r.expiresAt = this.deps.now() + this.deps.gracePeriodMs;
    this.logger.warn("Device plugin went away: its devices are unhealthy until it registers", {
      resource: name,
      error,
    });
    this.deps.events.endpointChanged(name);
  }

  /** A device's health as its plugin last listed it; "Unknown" when it is not listed. */
  health(name: string, id: string): "Healthy" | "Unhealthy" | "Unknown" {
    const d = this.devices(name).get(id);
    return d === undefined ? "Unknown" : d.healthy ? "Healthy" : "Unhealthy";
  }

  /** Closes every endpoint; their ends are not reported. */
  closeAll(): void {
    for (const name of this.table.keys()) {
      const { endpoint } = this.endpointOf(name);
      if (endpoint !== undefined) this.closeQuietly(endpoint);
    }
  }

  private closeQuietly(endpoint: DevicePluginEndpoint): void {
    try {
      endpoint.close();
    } catch (err) {
      this.logger.warn("Closing a replaced device plugin failed", {
        resource: endpoint.resourceName,
        error: err,
      });
    }
  }
}

export function healthyCount(devices: ReadonlyMap<string, PluginDevice>): number {
  let n = 0;
  for (const d of devices.values()) if (d.healthy) n++;
  return n;
}
