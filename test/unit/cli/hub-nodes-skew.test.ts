import { describe, expect, test } from "bun:test";
import type { Node } from "../../../src/api/node.ts";
import { printNodeTable } from "../../../src/cli/hub.ts";
import { HUB_ANNOTATIONS } from "../../../src/protocol/index.ts";

const now = Date.parse("2026-01-01T01:00:00Z");

const node = (name: string, skew?: string) =>
  ({
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      name,
      annotations: skew === undefined ? {} : { [HUB_ANNOTATIONS.clockSkew]: skew },
      creationTimestamp: "2026-01-01T00:00:00Z",
    },
    spec: {},
    status: { conditions: [{ type: "Ready", status: "True" }] },
  }) as unknown as Node;

const cells = (out: string, name: string) =>
  out
    .split("\n")
    .find((l) => l.startsWith(name))
    ?.split(/\s+/);

describe("the hub's `get nodes` table and clock skew", () => {
  const nodes = [
    node("synced", "1s"),
    node("edge", "-2m0s"),
    node("behind", "-3h0m12s"),
    node("ahead", "2m1s"),
    node("old-agent"),
  ];

  test("STATUS flags a clock off by more than 2 minutes either way with ClockSkew", () => {
    const out = printNodeTable(nodes, now);
    expect(cells(out, "synced")?.[1]).toBe("Ready");
    expect(cells(out, "edge")?.[1]).toBe("Ready");
    expect(cells(out, "behind")?.[1]).toBe("Ready,ClockSkew");
    expect(cells(out, "ahead")?.[1]).toBe("Ready,ClockSkew");
    expect(cells(out, "old-agent")?.[1]).toBe("Ready");
  });

  test("-o wide shows the skew in a CLOCK-SKEW column, <unknown> for an agent that sends none", () => {
    const out = printNodeTable(nodes, now, true);
    expect(out.split("\n")[0]).toEndWith("CLOCK-SKEW");
    expect(cells(out, "behind")?.at(-1)).toBe("-3h0m12s");
    expect(cells(out, "old-agent")?.at(-1)).toBe("<unknown>");
  });
});
