// The hub's view of each device's health (docs/protocol.md, "Device health"): the latest report
// and a short history, in memory as the node's online state and clock skew are (a restarted hub
// gets the latest again when each agent reconnects). Invariant: each node's history holds at
// most `limit` reports, oldest first; the latest is its last entry.
import type { DeviceHealth } from "../protocol/health.ts";

/** How many reports of each node are kept by default. */
const HEALTH_HISTORY = 60;

/** What GET /api/v1/nodes/NAME/health answers. */
export interface NodeHealthView {
  apiVersion: "fleetlet.io/v1";
  kind: "NodeHealth";
  node: string;
  /** The last report, absent when the device sent none since the hub started. */
  latest?: DeviceHealth;
  /** Reports oldest first, the latest included. */
  history: DeviceHealth[];
}

export class HealthHistory {
  /** Reports per node, oldest first. */
  private readonly byNode = new Map<string, DeviceHealth[]>();

  constructor(private readonly limit = HEALTH_HISTORY) {}

  /** Node `name` reported `health`. */
  add(name: string, health: DeviceHealth): void {
    const list = this.byNode.get(name) ?? [];
    list.push(health);
    if (list.length > this.limit) list.splice(0, list.length - this.limit);
    this.byNode.set(name, list);
  }

  view(name: string): NodeHealthView {
    const history = [...(this.byNode.get(name) ?? [])];
    const latest = history.at(-1);
    return {
      apiVersion: "fleetlet.io/v1",
      kind: "NodeHealth",
      node: name,
      ...(latest !== undefined && { latest }),
      history,
    };
  }

  forget(name: string): void {
    this.byNode.delete(name);
  }
}
