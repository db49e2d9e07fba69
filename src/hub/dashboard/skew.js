// @ts-check
// A device's clock skew as the hub measured it (docs/protocol.md, "Clock skew"): read from the
// Node's annotation, flagged beyond ±2 minutes. Pure functions; no DOM.

const CLOCK_SKEW_ANNOTATION = "hub.fleetlet.io/clock-skew";
/** Beyond this, the skew is flagged (the hub's CLOCK_SKEW_WARN_MS). */
const WARN_MS = 120_000;
const UNIT_MS = { h: 3_600_000, m: 60_000, s: 1_000, ms: 1 };

/**
 * Milliseconds of a signed Go duration as the hub writes it ("-3h0m12s", "45s"), or undefined.
 * @param {string} text
 * @returns {number | undefined}
 */
export function parseSkew(text) {
  const m = /^([-+]?)((?:\d+(?:\.\d+)?(?:h|ms|m|s))+)$/.exec(text);
  if (!m) return undefined;
  let total = 0;
  for (const [, n, unit] of (m[2] ?? "").matchAll(/(\d+(?:\.\d+)?)(h|ms|m|s)/g))
    total += Number(n) * UNIT_MS[/** @type {keyof typeof UNIT_MS} */ (unit)];
  return m[1] === "-" ? -total : total;
}

/**
 * The node's clock skew as a state: "Clock 3h0m12s behind" (warn beyond ±2 min), or undefined
 * when the hub has no figure (an agent that does not send its clock).
 * @param {{ metadata: { annotations?: Record<string, string> } }} node
 * @returns {{ label: string, tone: "ok" | "warn", ms: number } | undefined}
 */
export function clockSkewState(node) {
  const text = node.metadata.annotations?.[CLOCK_SKEW_ANNOTATION];
  const ms = text === undefined ? undefined : parseSkew(text);
  if (text === undefined || ms === undefined) return undefined;
  const size = text.replace(/^[-+]/, "");
  const label =
    Math.abs(ms) < 1000 ? "Clock in sync" : `Clock ${size} ${ms < 0 ? "behind" : "ahead"}`;
  return { label, tone: Math.abs(ms) > WARN_MS ? "warn" : "ok", ms };
}
