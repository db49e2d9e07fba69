// A small Prometheus registry: counters and gauges with labels, rendered in the text exposition
// format 0.0.4. Invariants: metric and label names are valid Prometheus names, a name is
// registered once, and every sample of a metric carries exactly the metric's label names.

type Labels = Record<string, string>;

export interface Counter {
  /** Adds `by` (>= 0, default 1) to the series with these labels. */
  inc(labels?: Labels, by?: number): void;
  get(labels?: Labels): number;
}

export interface Gauge {
  set(labels: Labels, value: number): void;
  inc(labels?: Labels, by?: number): void;
  get(labels?: Labels): number;
  /** Removes every series (for gauges rebuilt from scratch on each scrape). */
  reset(): void;
}

export interface MetricsRegistry {
  counter(name: string, help: string, labelNames?: string[]): Counter;
  gauge(name: string, help: string, labelNames?: string[]): Gauge;
  /** Calls `collect` before every render, e.g. to refresh gauges from current state. */
  onCollect(collect: () => void): void;
  /** All metrics, sorted by name, in the text format. */
  render(): string;
}

export const PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

const metricNameRe = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const labelNameRe = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

interface Family {
  name: string;
  help: string;
  type: "counter" | "gauge";
  labelNames: string[];
  series: Map<string, { labels: Labels; value: number }>;
}

function escapeLabelValue(v: string): string {
  return v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
}

function escapeHelp(v: string): string {
  return v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n");
}

function formatValue(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Number.POSITIVE_INFINITY) return "+Inf";
  if (v === Number.NEGATIVE_INFINITY) return "-Inf";
  return String(v);
}

function seriesKey(family: Family, labels: Labels): string {
  const names = Object.keys(labels).sort();
  const expected = [...family.labelNames].sort();
  if (names.length !== expected.length || names.some((n, i) => n !== expected[i])) {
    throw new Error(
      `metric ${family.name} takes labels [${family.labelNames.join(", ")}], got [${Object.keys(labels).join(", ")}]`,
    );
  }
  return JSON.stringify(family.labelNames.map((n) => labels[n]));
}

function renderFamily(f: Family): string {
  const lines = [`# HELP ${f.name} ${escapeHelp(f.help)}`, `# TYPE ${f.name} ${f.type}`];
  for (const { labels, value } of f.series.values()) {
    const pairs = f.labelNames.map((n) => `${n}="${escapeLabelValue(labels[n] ?? "")}"`);
    const suffix = pairs.length > 0 ? `{${pairs.join(",")}}` : "";
    lines.push(`${f.name}${suffix} ${formatValue(value)}`);
  }
  return `${lines.join("\n")}\n`;
}

export function createMetricsRegistry(): MetricsRegistry {
  const families = new Map<string, Family>();
  const collectors: Array<() => void> = [];

  const register = (type: Family["type"], name: string, help: string, labelNames: string[]) => {
    if (!metricNameRe.test(name)) throw new Error(`invalid metric name ${JSON.stringify(name)}`);
    const bad = labelNames.find((n) => !labelNameRe.test(n) || n.startsWith("__"));
    if (bad !== undefined) throw new Error(`invalid label name ${JSON.stringify(bad)} of ${name}`);
    if (families.has(name)) throw new Error(`metric ${name} is already registered`);
    const family: Family = { name, help, type, labelNames, series: new Map() };
    families.set(name, family);
    return family;
  };

  const add = (f: Family, labels: Labels, by: number) => {
    const key = seriesKey(f, labels);
    const s = f.series.get(key);
    if (s) s.value += by;
    else f.series.set(key, { labels: { ...labels }, value: by });
  };
  const get = (f: Family, labels: Labels) => f.series.get(seriesKey(f, labels))?.value ?? 0;

  return {
    counter(name, help, labelNames = []) {
      const f = register("counter", name, help, labelNames);
      return {
        inc(labels = {}, by = 1) {
          if (!(by >= 0)) throw new Error(`counter ${name} cannot be increased by ${by}`);
          add(f, labels, by);
        },
        get: (labels = {}) => get(f, labels),
      };
    },
    gauge(name, help, labelNames = []) {
      const f = register("gauge", name, help, labelNames);
      return {
        set(labels, value) {
          f.series.set(seriesKey(f, labels), { labels: { ...labels }, value });
        },
        inc: (labels = {}, by = 1) => add(f, labels, by),
        get: (labels = {}) => get(f, labels),
        reset: () => f.series.clear(),
      };
    },
    onCollect(collect) {
      collectors.push(collect);
    },
    render() {
      for (const c of collectors) c();
      return [...families.values()]
        .sort((a, b) => a.name.localeCompare(b.name))
        .map(renderFamily)
        .join("");
    },
  };
}
