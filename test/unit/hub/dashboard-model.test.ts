// The dashboard's model (src/hub/dashboard/model.js, plain browser JS): what it shows for pods
// must be what `fleetlet get pods` shows for them, and its node and quantity helpers.
import { describe, expect, test } from "bun:test";
import { podDisplayStatus } from "../../../src/agent/status/index.ts";
import type { Node } from "../../../src/api/node.ts";
import {
  bytes,
  describeProbe,
  eventIsFor,
  fleetSummary,
  foldRepeats,
  formatQuantity,
  imageRows,
  newestFirst,
  nodeState,
  parseQuantity,
  podCounts,
  podState,
  pressures,
  ready,
  restarts,
} from "../../../src/hub/dashboard/model.js";
import { makePod } from "../status/builders.ts";
import { cases, podFor } from "../status/display-cases.ts";

type KObject = Parameters<typeof podState>[0];

function node(
  name: string,
  ready: "True" | "False" | "Unknown" | undefined,
  annotations: Record<string, string> = {},
  pressure: string[] = [],
): KObject {
  const conditions = [
    ...(ready === undefined ? [] : [{ type: "Ready", status: ready, reason: "KubeletReady" }]),
    ...pressure.map((type) => ({ type, status: "True" })),
    { type: "PIDPressure", status: "False" },
  ];
  return { metadata: { name, annotations }, spec: {}, status: { conditions } } as Node as KObject;
}

describe("dashboard model: pods as `get pods` shows them", () => {
  for (const c of cases) {
    test(`${c.name}: the CLI's STATUS, READY and RESTARTS`, () => {
      const pod = podFor(c);
      const cli = podDisplayStatus(pod);
      const r = ready(pod as KObject);
      expect(podState(pod as KObject).label).toBe(cli.status);
      expect(`${r.ready}/${r.total}`).toBe(cli.ready);
      expect(restarts(pod as KObject)).toBe(cli.restarts);
    });
  }

  test("tones: ready Running ok, partly ready warn, waiting warn, failures bad", () => {
    const tone = (i: number) => podState(podFor(cases[i] as (typeof cases)[number]) as KObject);
    const byName = (name: string) => cases.findIndex((c) => c.name.startsWith(name));
    expect(tone(byName("Running with every container ready")).tone).toBe("ok");
    expect(tone(byName("ContainerCreating")).tone).toBe("warn");
    expect(tone(byName("Init:0/1")).tone).toBe("warn");
    expect(tone(byName("NotReady")).tone).toBe("warn");
    expect(tone(byName("Completed")).tone).toBe("ok");
    expect(tone(byName("CrashLoopBackOff")).tone).toBe("bad");
    expect(tone(byName("Init:Error")).tone).toBe("bad");
    expect(tone(byName("OOMKilled")).tone).toBe("bad");
  });

  test("a pod with no status yet is Unknown, not blank", () => {
    const pod = makePod();
    delete pod.status;
    expect(podState(pod as KObject)).toEqual({ label: "Unknown", tone: "warn" });
  });

  test("podCounts() and fleetSummary() count running, pending, failing and restarts", () => {
    const pick = (prefix: string) =>
      podFor(cases.find((c) => c.name.startsWith(prefix)) as (typeof cases)[number]) as KObject;
    const pods = [
      pick("Running with every container ready"),
      pick("CrashLoopBackOff with restarts"),
      pick("ContainerCreating"),
      pick("Completed when"),
    ];
    const counts = podCounts(pods);
    expect(counts).toEqual({ total: 4, running: 1, pending: 1, failing: 1, restarts: 5 });
    const summary = fleetSummary(
      [
        node("a", "True", { "hub.fleetlet.io/online": "true" }),
        node("b", "False"),
        node("c", undefined, { "hub.fleetlet.io/online": "true" }, ["DiskPressure"]),
      ],
      pods,
    );
    expect(summary).toEqual({ nodes: 3, online: 2, ready: 1, underPressure: 1, pods: counts });
  });
});

describe("dashboard model: nodes", () => {
  test("nodeState() follows the Ready condition; Revoked wins; no condition is Unknown", () => {
    expect(nodeState(node("a", "True")).label).toBe("Ready");
    expect(nodeState(node("a", "False")).label).toBe("NotReady");
    expect(nodeState(node("a", "Unknown")).label).toBe("Unknown");
    expect(nodeState(node("a", undefined))).toMatchObject({
      label: "Unknown",
      message: "the device has not reported its status yet",
    });
    const revoked = node("a", "True", { "hub.fleetlet.io/revoked": "2026-12-01T10:00:00Z" });
    expect(nodeState(revoked)).toEqual({ label: "Revoked", tone: "bad" });
  });

  test("imageRows() names each reported image by its first tag, with its size", () => {
    const n = node("a", "True");
    n.status.images = [
      { names: ["r@sha256:1", "r:2", "r:1"], sizeBytes: 33 * 2 ** 20 },
      { names: ["only@sha256:2"], sizeBytes: 1536 },
    ];
    expect(imageRows(n)).toEqual([
      { name: "r:2", size: "33 MiB" },
      { name: "only@sha256:2", size: "1.5 KiB" },
    ]);
    expect(imageRows(node("b", "True"))).toEqual([]);
  });

  test("pressures() lists the pressure conditions that are True", () => {
    expect(pressures(node("a", "True", {}, ["MemoryPressure", "DiskPressure"]))).toEqual([
      "MemoryPressure",
      "DiskPressure",
    ]);
    expect(pressures(node("a", "False"))).toEqual([]);
  });
});

describe("dashboard model: quantities, probes, events", () => {
  test("parseQuantity() reads binary, decimal and exponent forms; junk is NaN", () => {
    expect(parseQuantity("512Mi")).toBe(512 * 2 ** 20);
    expect(parseQuantity("250m")).toBeCloseTo(0.25);
    expect(parseQuantity("1e3")).toBe(1000);
    expect(parseQuantity("2")).toBe(2);
    expect(parseQuantity("1.5G")).toBe(1.5e9);
    expect(parseQuantity("12x")).toBeNaN();
    expect(parseQuantity(undefined)).toBeNaN();
  });

  test("formatQuantity() and bytes() print cores, binary sizes and counts", () => {
    expect(formatQuantity("cpu", "1")).toBe("1 core");
    expect(formatQuantity("cpu", "1500m")).toBe("1.5 cores");
    expect(formatQuantity("memory", "8053063680")).toBe("7.5 GiB");
    expect(formatQuantity("ephemeral-storage", "512Mi")).toBe("512 MiB");
    expect(formatQuantity("pods", "110")).toBe("110");
    expect(formatQuantity("memory", undefined)).toBe("—");
    expect(formatQuantity("memory", "lots")).toBe("lots");
    expect(bytes(100)).toBe("100 B");
    expect(bytes(1536)).toBe("1.5 KiB");
  });

  test("describeProbe() says how, how often, and when it fails", () => {
    expect(
      describeProbe({ httpGet: { port: 8080, path: "/healthz" }, initialDelaySeconds: 5 }),
    ).toBe("HTTP GET :8080/healthz every 10s, after 5s, timeout 1s, fails after 3");
    expect(describeProbe({ exec: { command: ["cat", "/ok"] }, periodSeconds: 2 })).toBe(
      "exec cat /ok every 2s, timeout 1s, fails after 3",
    );
    expect(describeProbe(undefined)).toBe("");
  });

  test("eventIsFor() matches a pod's events on its node; newestFirst() sorts them", () => {
    const pod = makePod() as KObject; // web-node1 in default
    const ev = (name: string, host: string | undefined, last: string) => ({
      metadata: { name: `${name}.1` },
      involvedObject: { kind: "Pod", name, namespace: "default" },
      reason: "Started",
      message: "",
      type: "Normal",
      source: host === undefined ? {} : { host },
      count: 1,
      firstTimestamp: last,
      lastTimestamp: last,
    });
    expect(eventIsFor(ev("web-node1", "cam-1", "t"), "cam-1", pod)).toBe(true);
    expect(eventIsFor(ev("web-node1", undefined, "t"), "cam-1", pod)).toBe(true);
    expect(eventIsFor(ev("web-node1", "cam-2", "t"), "cam-1", pod)).toBe(false);
    expect(eventIsFor(ev("db", "cam-1", "t"), "cam-1", pod)).toBe(false);
    const sorted = newestFirst([
      ev("web", "a", "2026-12-01T10:00:00Z"),
      ev("web", "a", "2026-12-01T10:02:00Z"),
      ev("web", "a", "2026-12-01T10:01:00Z"),
    ]);
    expect(sorted.map((e) => e.lastTimestamp)).toEqual([
      "2026-12-01T10:02:00Z",
      "2026-12-01T10:01:00Z",
      "2026-12-01T10:00:00Z",
    ]);
  });
  test("newestFirst() puts the last to arrive first among events of one second", () => {
    const at = "2026-12-01T10:00:00Z";
    const ev = (name: string, last: string) => ({ metadata: { name }, lastTimestamp: last });
    const sorted = newestFirst([
      ev("pulling", at),
      ev("pulled", at),
      ev("old", "2026-12-01T09:59:59Z"),
      ev("created", at),
    ] as never[]) as { metadata: { name: string } }[];
    expect(sorted.map((e) => e.metadata.name)).toEqual(["created", "pulled", "pulling", "old"]);
  });

  test("foldRepeats() makes repeats one row with their count and span; one event seen twice counts once", () => {
    const ev = (name: string, reason: string, count: number, first: string, last: string) => ({
      metadata: { name },
      involvedObject: { kind: "Pod", name: "web", namespace: "default" },
      type: "Warning",
      reason,
      message: "Back-off restarting failed container",
      count,
      firstTimestamp: first,
      lastTimestamp: last,
    });
    const folded = foldRepeats([
      ev("web.1", "BackOff", 3, "2026-12-01T10:00:00Z", "2026-12-01T10:01:00Z"),
      ev("web.2", "Failed", 1, "2026-12-01T10:00:30Z", "2026-12-01T10:00:30Z"),
      ev("web.3", "BackOff", 2, "2026-12-01T10:02:00Z", "2026-12-01T10:03:00Z"),
      ev("web.3", "BackOff", 4, "2026-12-01T10:02:00Z", "2026-12-01T10:04:00Z"), // web.3 again, later
    ] as never[]) as ReturnType<typeof ev>[];
    expect(folded.map((e) => [e.reason, e.count, e.firstTimestamp, e.lastTimestamp])).toEqual([
      ["Failed", 1, "2026-12-01T10:00:30Z", "2026-12-01T10:00:30Z"],
      ["BackOff", 7, "2026-12-01T10:00:00Z", "2026-12-01T10:04:00Z"],
    ]);
  });
});
