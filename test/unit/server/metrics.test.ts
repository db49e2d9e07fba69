import { describe, expect, test } from "bun:test";
import { createMetricsRegistry } from "../../../src/agent/server/metrics.ts";

describe("createMetricsRegistry()", () => {
  test("renders counters and gauges with labels in the Prometheus text format, sorted by name", () => {
    const reg = createMetricsRegistry();
    const restarts = reg.counter("fleetlet_container_restarts_total", "Container restarts.", [
      "pod",
      "container",
    ]);
    const pods = reg.gauge("fleetlet_pods", "Pods by phase.", ["phase"]);
    const up = reg.gauge("fleetlet_up", "1 when the agent runs.");
    restarts.inc({ pod: "web", container: "app" });
    restarts.inc({ container: "app", pod: "web" }, 2);
    pods.set({ phase: "Running" }, 3);
    up.set({}, 1);
    expect(reg.render()).toBe(
      [
        "# HELP fleetlet_container_restarts_total Container restarts.",
        "# TYPE fleetlet_container_restarts_total counter",
        'fleetlet_container_restarts_total{pod="web",container="app"} 3',
        "# HELP fleetlet_pods Pods by phase.",
        "# TYPE fleetlet_pods gauge",
        'fleetlet_pods{phase="Running"} 3',
        "# HELP fleetlet_up 1 when the agent runs.",
        "# TYPE fleetlet_up gauge",
        "fleetlet_up 1",
        "",
      ].join("\n"),
    );
  });

  test("escapes label values and help text", () => {
    const reg = createMetricsRegistry();
    reg.counter("x_total", "help with \\ and\nnewline", ["v"]).inc({ v: 'a"b\\c\nd' });
    expect(reg.render()).toContain('x_total{v="a\\"b\\\\c\\nd"} 1');
    expect(reg.render()).toContain("# HELP x_total help with \\\\ and\\nnewline");
  });

  test("runs collectors before rendering, so gauges reflect current state", () => {
    const reg = createMetricsRegistry();
    const g = reg.gauge("pods", "Pods.");
    let n = 1;
    reg.onCollect(() => g.set({}, n));
    expect(reg.render()).toContain("pods 1\n");
    n = 2;
    expect(reg.render()).toContain("pods 2\n");
  });

  test("refuses bad names, duplicate names, wrong labels and negative counter increments", () => {
    const reg = createMetricsRegistry();
    expect(() => reg.counter("bad-name", "h")).toThrow('invalid metric name "bad-name"');
    expect(() => reg.gauge("g", "h", ["__x"])).toThrow('invalid label name "__x" of g');
    const c = reg.counter("c_total", "h", ["pod"]);
    expect(() => reg.counter("c_total", "h")).toThrow("metric c_total is already registered");
    expect(() => c.inc({ node: "x" })).toThrow("metric c_total takes labels [pod], got [node]");
    expect(() => c.inc({ pod: "x" }, -1)).toThrow("counter c_total cannot be increased by -1");
  });
});
