// The device's health on the agent's /metrics, from the health reporter's latest reading
// (nothing is read from /proc or /sys when metrics are scraped).
import type { DeviceHealth } from "../../protocol/health.ts";
import type { MetricsRegistry } from "../server/metrics.ts";

function healthGauges(m: MetricsRegistry) {
  return {
    temperature: m.gauge("fleetlet_node_temperature_celsius", "Thermal zone temperature.", [
      "zone",
      "type",
    ]),
    throttled: m.gauge(
      "fleetlet_node_throttled",
      "1 for each throttling flag the board's firmware sets (Raspberry Pi get_throttled).",
      ["flag"],
    ),
    load: m.gauge("fleetlet_node_load", "Load average.", ["period"]),
    boot: m.gauge("fleetlet_node_boot_time_seconds", "When the device booted (Unix time)."),
    fsSize: m.gauge("fleetlet_node_filesystem_size_bytes", "Filesystem size.", ["mountpoint"]),
    fsUsed: m.gauge("fleetlet_node_filesystem_used_bytes", "Filesystem bytes used.", [
      "mountpoint",
    ]),
    fsAvail: m.gauge("fleetlet_node_filesystem_available_bytes", "Filesystem bytes available.", [
      "mountpoint",
    ]),
    wear: m.gauge("fleetlet_node_storage_life_used_percent", "eMMC life used, in %.", ["device"]),
    rx: m.gauge("fleetlet_node_network_receive_bytes_total", "Bytes received.", ["interface"]),
    tx: m.gauge("fleetlet_node_network_transmit_bytes_total", "Bytes sent.", ["interface"]),
  };
}

type Gauges = ReturnType<typeof healthGauges>;

function setAll(g: Gauges, h: DeviceHealth): void {
  for (const t of h.temperatures) g.temperature.set({ zone: t.zone, type: t.type }, t.celsius);
  for (const f of h.throttled?.flags ?? []) g.throttled.set({ flag: f }, 1);
  h.load?.forEach((l, i) => {
    g.load.set({ period: ["1m", "5m", "15m"][i] ?? "" }, l);
  });
  if (h.bootTime !== undefined) g.boot.set({}, h.bootTime / 1000);
  for (const f of h.filesystems) {
    g.fsSize.set({ mountpoint: f.mountpoint }, f.totalBytes);
    g.fsUsed.set({ mountpoint: f.mountpoint }, f.usedBytes);
    g.fsAvail.set({ mountpoint: f.mountpoint }, f.availableBytes);
  }
  for (const s of h.storage ?? [])
    if (s.lifeUsedPercent !== undefined) g.wear.set({ device: s.device }, s.lifeUsedPercent);
  for (const i of h.interfaces) {
    if (i.rxBytes !== undefined) g.rx.set({ interface: i.name }, i.rxBytes);
    if (i.txBytes !== undefined) g.tx.set({ interface: i.name }, i.txBytes);
  }
}

/** Registers the health gauges; each collection shows `latest()` (none before the first reading). */
export function registerHealthMetrics(
  metrics: MetricsRegistry,
  latest: () => DeviceHealth | undefined,
): void {
  const g = healthGauges(metrics);
  metrics.onCollect(() => {
    for (const gauge of Object.values(g)) gauge.reset();
    const h = latest();
    if (h !== undefined) setAll(g, h);
  });
}
