// @ts-check
// A short history as a line of text bars (no library, no markup).

const BARS = "▁▂▃▄▅▆▇█";

/** Values as a line of bars scaled between their min and max. @param {number[]} values */
export function sparkline(values) {
  if (values.length === 0) return "";
  const lo = Math.min(...values);
  const span = Math.max(...values) - lo;
  return values
    .map((v) => BARS[span === 0 ? 0 : Math.round(((v - lo) / span) * (BARS.length - 1))])
    .join("");
}
