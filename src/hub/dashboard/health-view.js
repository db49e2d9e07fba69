// @ts-check
// A device's health on its page (docs/protocol.md, "Device health"): the latest report's facts,
// filesystems and interfaces, and a short history as text sparklines (no library, no markup).
import { badge, facts, h, panel, table } from "./dom.js";
import { bytes } from "./model.js";
import { sparkline } from "./sparkline.js";

/** @typedef {{ collectedAt: number, bootTime?: number, uptimeSeconds?: number, load?: number[],
 *   temperatures: { zone: string, type: string, celsius: number }[],
 *   throttled?: { raw: number, flags: string[] },
 *   filesystems: { mountpoint: string, device: string, fsType: string, totalBytes: number, usedBytes: number, availableBytes: number }[],
 *   storage?: { device: string, lifeUsedPercent?: number, preEol?: string }[],
 *   interfaces: { name: string, state?: string, addresses: string[], rxBytes?: number, txBytes?: number }[] }} Health */
/** @typedef {{ latest?: Health, history: Health[] }} HealthView */

/** @param {HealthView} view */
function history(view) {
  const temps = view.history.map((r) => Math.max(...r.temperatures.map((t) => t.celsius), -273));
  const loads = view.history.map((r) => r.load?.[0] ?? 0);
  const hasTemp = view.history.some((r) => r.temperatures.length > 0);
  return h(
    "p",
    { cls: "muted small" },
    `Last ${view.history.length} reports · `,
    hasTemp ? h("span", { title: "hottest zone, °C" }, `temperature ${sparkline(temps)} · `) : "",
    h("span", { title: "load, 1 minute" }, `load ${sparkline(loads)}`),
  );
}

/** @param {Health} r */
function summary(r) {
  const flags = r.throttled?.flags ?? [];
  return facts([
    [
      "Temperature",
      r.temperatures.map((t) => `${t.type || t.zone} ${t.celsius.toFixed(1)} °C`).join(", "),
    ],
    [
      "Throttling",
      r.throttled ? flags.map((f) => badge(f, f.endsWith("-occurred") ? "warn" : "bad")) : "",
    ],
    ["Load", r.load ? r.load.map((l) => l.toFixed(2)).join(" ") : ""],
    ["Booted", r.bootTime ? new Date(r.bootTime).toISOString() : ""],
    [
      "Storage wear",
      (r.storage ?? [])
        .map((s) => `${s.device} ${s.lifeUsedPercent ?? "?"} % (${s.preEol ?? "?"})`)
        .join(", "),
    ],
    ["Reported", new Date(r.collectedAt).toISOString()],
  ]);
}

/**
 * The Health panel; `view` undefined while it loads.
 * @param {HealthView | undefined} view
 */
export function healthPanel(view) {
  const r = view?.latest;
  if (!view || !r)
    return panel("Health", h("p", { cls: "muted" }, "The device has not reported its health yet."));
  return panel(
    "Health",
    summary(r),
    history(view),
    table(
      ["Filesystem", "Device", "Type", "Size", "Used", "Use"],
      r.filesystems.map((f) => [
        f.mountpoint,
        f.device,
        f.fsType,
        bytes(f.totalBytes),
        bytes(f.usedBytes),
        `${f.totalBytes > 0 ? Math.round((f.usedBytes / f.totalBytes) * 100) : 0} %`,
      ]),
      "No filesystems reported.",
    ),
    table(
      ["Interface", "State", "Addresses", "Received", "Sent"],
      r.interfaces.map((i) => [
        i.name,
        i.state ?? "",
        i.addresses.join(", "),
        i.rxBytes === undefined ? "" : bytes(i.rxBytes),
        i.txBytes === undefined ? "" : bytes(i.txBytes),
      ]),
      "No interfaces reported.",
    ),
  );
}
