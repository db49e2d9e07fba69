// The device manager's metrics: plugins registered, devices and allocations per resource, and
// Allocate calls (the kubelet has device_plugin_registration_total and device_plugin_alloc_*;
// these are fleetlet's own names, from the manager's stats).
import type { MetricsRegistry } from "../../server/index.ts";
import type { DeviceStats } from "./index.ts";

export function registerDeviceMetrics(metrics: MetricsRegistry, stats: () => DeviceStats): void {
  const registered = metrics.gauge(
    "fleetlet_device_plugin_registered",
    "Whether the plugin of an extended resource is registered now (1) or not (0).",
    ["resource_name"],
  );
  const devices = metrics.gauge(
    "fleetlet_devices",
    "Devices of an extended resource, by state: all (capacity), healthy (allocatable), allocated.",
    ["resource_name", "state"],
  );
  const allocations = metrics.counter(
    "fleetlet_device_allocations_total",
    "Allocate calls made for containers, by result.",
    ["result"],
  );
  metrics.onCollect(() => {
    const s = stats();
    registered.reset();
    devices.reset();
    for (const r of s.resources) {
      const resource_name = r.resourceName;
      registered.set({ resource_name }, r.registered ? 1 : 0);
      devices.set({ resource_name, state: "all" }, r.devices);
      devices.set({ resource_name, state: "healthy" }, r.healthy);
      devices.set({ resource_name, state: "allocated" }, r.allocated);
    }
    const failed = { result: "failed" };
    const succeeded = { result: "succeeded" };
    allocations.inc(failed, Math.max(0, s.allocationFailures - allocations.get(failed)));
    const ok = s.allocations - s.allocationFailures;
    allocations.inc(succeeded, Math.max(0, ok - allocations.get(succeeded)));
  });
}
