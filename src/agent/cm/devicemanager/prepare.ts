// Getting one pod its devices before its containers start: waiting for a known plugin to
// register (fleetlet's addition: the kubelet fails such a pod at once), then per resource the
// choice of devices (with the plugin's preference), then Allocate per container, and the
// checkpoint. The kubelet's failure reasons and messages, word for word.
// Invariant: a pod's entries are recorded only when every Allocate answered and the checkpoint
// was written; on any failure the pod holds nothing new.
import type { Pod } from "../../../api/types.ts";
import { abortReason } from "../../../util/clock.ts";
import type { Logger } from "../../../util/log.ts";
import type { AdmitFailure } from "../../lifecycle/index.ts";
import { formatGoDuration } from "../../status/reasons.ts";
import { type ContainerRequest, chooseDevices, type Prefer } from "./allocation.ts";
import type { CheckpointEntry } from "./checkpoint.ts";
import type { DevicePreparation } from "./index.ts";
import type { PodDeviceNeeds } from "./needs.ts";
import type { PodDevices } from "./pod-devices.ts";
import type { DevicePluginEndpoint, PluginDevice } from "./types.ts";

/** Where a resource stands for a pod that needs it. */
export type ResourceStatus =
  /** Its endpoint is live and listed these devices. */
  | { served: ReadonlyMap<string, PluginDevice>; endpoint: DevicePluginEndpoint }
  /** Known (checkpoint, host device group, plugin gone within its grace period), not served. */
  | "known"
  | "unknown";

/** What the manager lends prepare(): its state and narrow functions. */
export interface PrepareContext {
  now(): number;
  logger: Logger;
  waitTimeoutMs: number;
  /** When each pod first waited for a plugin (its wait is set here). */
  waiting: Map<string, { since: number; told: boolean }>;
  podDevices: PodDevices;
  status(resource: string): ResourceStatus;
  /** Counts one Allocate call, and whether it failed. */
  counted(failed: boolean): void;
  /** Writes the checkpoint with the entries recorded; throws when it cannot. */
  save(): void;
}

const UNEXPECTED = "UnexpectedAdmissionError";

/** The kubelet's admission failure for an error of its device manager. */
export function unexpected(error: string): { state: "failed"; reason: string; message: string } {
  return {
    state: "failed",
    reason: UNEXPECTED,
    message: `Allocate failed due to ${error}, which is unexpected`,
  };
}

export function requestedUnavailable(name: string, requested: number, available: number): string {
  return `requested number of devices unavailable for ${name}. Requested: ${requested}, Available: ${available}`;
}

/** The kubelet's failure for an extended resource the node does not have at all. */
export function outOf(name: string, requested: number): AdmitFailure {
  return {
    reason: `OutOf${name}`,
    message: `Node didn't have enough resource: ${name}, requested: ${requested}, used: 0, capacity: 0`,
  };
}

/** Whether the pod must wait for a plugin, or fail for one that nobody serves or that did not
 * register within the wait; undefined when every resource it needs is served. */
export function checkWaits(
  ctx: PrepareContext,
  uid: string,
  needs: PodDeviceNeeds,
): Exclude<DevicePreparation, { state: "ready" }> | undefined {
  const names = Object.keys(needs.total).sort();
  const statuses = names.map((name) => [name, ctx.status(name)] as const);
  const unknown = statuses.find(([, s]) => s === "unknown");
  if (unknown !== undefined) return unexpected(`cannot allocate unregistered device ${unknown[0]}`);
  const waitFor = statuses.find(([, s]) => s === "known");
  if (waitFor === undefined) return undefined;
  const now = ctx.now();
  const wait = ctx.waiting.get(uid) ?? { since: now, told: false };
  ctx.waiting.set(uid, wait);
  if (now - wait.since >= ctx.waitTimeoutMs)
    return unexpected(`cannot allocate unregistered device ${waitFor[0]}`);
  return {
    state: "waiting",
    reason: "DevicePluginNotRegistered",
    message: `waiting up to ${formatGoDuration(ctx.waitTimeoutMs)} for the device plugin of ${waitFor[0]} to register`,
  };
}

/** Chooses and allocates every device the pod lacks (every resource it needs is served). */
export async function allocatePod(
  ctx: PrepareContext,
  pod: Pod,
  needs: PodDeviceNeeds,
  signal?: AbortSignal,
): Promise<DevicePreparation> {
  const uid = pod.metadata.uid ?? "";
  try {
    const chosen = await chooseAll(ctx, pod, needs, signal);
    if (!Array.isArray(chosen)) return chosen;
    const entries = await allocateAll(ctx, uid, chosen, signal);
    ctx.podDevices.add(entries);
    try {
      ctx.save();
    } catch (err) {
      ctx.podDevices.remove(entries);
      throw new Error(`cannot write the device checkpoint: ${(err as Error).message}`);
    }
    return { state: "ready" };
  } catch (err) {
    if (signal?.aborted) throw abortReason(signal);
    const message = err instanceof Error ? err.message : String(err);
    ctx.logger.warn("Cannot allocate the devices of a pod", {
      pod: pod.metadata.name,
      uid,
      error: message,
    });
    return unexpected(message);
  }
}

/** A device choice for one container and resource, before Allocate. */
interface Chosen {
  container: string;
  resource: string;
  ids: string[];
  endpoint: DevicePluginEndpoint;
  devices: ReadonlyMap<string, PluginDevice>;
}

async function chooseAll(
  ctx: PrepareContext,
  pod: Pod,
  needs: PodDeviceNeeds,
  signal?: AbortSignal,
): Promise<Chosen[] | DevicePreparation> {
  const uid = pod.metadata.uid ?? "";
  const out: Chosen[] = [];
  for (const name of Object.keys(needs.total).sort()) {
    const status = ctx.status(name);
    if (typeof status === "string")
      return unexpected(`cannot allocate unregistered device ${name}`);
    const { endpoint, served } = status;
    const containers: ContainerRequest[] = needs.containers
      .filter((c) => (c.resources[name] ?? 0) > 0)
      .map((c) => ({
        name: c.name,
        kind: c.kind,
        count: c.resources[name] ?? 0,
        held: ctx.podDevices.ids(uid, c.name, name),
      }));
    const healthy = [...served.values()].filter((d) => d.healthy).map((d) => d.id);
    const prefer: Prefer | undefined = endpoint.options.getPreferredAllocationAvailable
      ? (_, req) => endpoint.preferredAllocation(req.available, req.mustInclude, req.size, signal)
      : undefined;
    const choice = await chooseDevices(
      { healthy, heldByOthers: ctx.podDevices.held(name, (u) => u !== uid), containers },
      prefer,
    );
    if (!choice.ok)
      return unexpected(requestedUnavailable(name, choice.requested, choice.available));
    for (const r of choice.rejected)
      ctx.logger.warn("Preferred allocation of a device plugin not used", {
        resource: name,
        pod: pod.metadata.name,
        container: r.container,
        answer: r.answer,
        problem: r.problem,
      });
    for (const [container, ids] of choice.ids)
      out.push({ container, resource: name, ids, endpoint, devices: served });
  }
  // Allocate goes container by container, in the pod's order (the choices are per resource).
  const order = new Map(needs.containers.map((c, i) => [c.name, i]));
  return out.sort((a, b) => (order.get(a.container) ?? 0) - (order.get(b.container) ?? 0));
}

/** Allocate for each choice, containers in the pod's order. */
async function allocateAll(
  ctx: PrepareContext,
  uid: string,
  chosen: Chosen[],
  signal?: AbortSignal,
): Promise<CheckpointEntry[]> {
  const entries: CheckpointEntry[] = [];
  for (const c of chosen) {
    let allocation: Awaited<ReturnType<DevicePluginEndpoint["allocate"]>>;
    try {
      allocation = await c.endpoint.allocate(c.ids, signal);
      ctx.counted(false);
    } catch (err) {
      ctx.counted(true);
      throw err;
    }
    entries.push({
      podUid: uid,
      containerName: c.container,
      resourceName: c.resource,
      deviceIds: c.ids,
      deviceIdsByNuma: byNuma(c.ids, c.devices),
      allocation,
    });
  }
  return entries;
}

function byNuma(
  ids: readonly string[],
  devices: ReadonlyMap<string, PluginDevice>,
): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const id of ids) {
    const nodes = devices.get(id)?.numaNodes ?? [];
    for (const n of nodes.length > 0 ? nodes : [-1]) {
      const key = String(n);
      out[key] = [...(out[key] ?? []), id];
    }
  }
  return out;
}
