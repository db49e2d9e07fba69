import { describe, expect, test } from "bun:test";
import type { DaemonSet } from "../../../src/api/daemonset.ts";
import { parseLabelArgs } from "../../../src/cli/deploy.ts";
import { printDaemonSetTable, printDevices } from "../../../src/cli/rollout.ts";

const ds: DaemonSet = {
  apiVersion: "apps/v1",
  kind: "DaemonSet",
  metadata: { name: "web", namespace: "edge", creationTimestamp: "2026-01-01T00:00:00Z" },
  spec: {
    selector: {
      matchLabels: { app: "web" },
      matchExpressions: [{ key: "tier", operator: "In", values: ["a", "b"] }],
    },
    template: {
      metadata: { labels: { app: "web" } },
      spec: { nodeSelector: { site: "a" }, containers: [{ name: "main", image: "busybox:1" }] },
    },
  },
  status: {
    desiredNumberScheduled: 3,
    currentNumberScheduled: 3,
    numberReady: 2,
    updatedNumberScheduled: 1,
    numberAvailable: 2,
    numberMisscheduled: 0,
  },
};

describe("fleetlet get daemonsets / rollout / label", () => {
  test("prints kubectl's DaemonSet columns, with the namespace for -A and more for -o wide", () => {
    const now = Date.parse("2026-01-01T00:05:00Z");
    expect(printDaemonSetTable([ds], now, { withNamespace: true, wide: true }).split("\n")).toEqual(
      [
        "NAMESPACE   NAME   DESIRED   CURRENT   READY   UP-TO-DATE   AVAILABLE   NODE SELECTOR   AGE   CONTAINERS   IMAGES      SELECTOR",
        "edge        web    3         3         2       1            2           site=a          5m    main         busybox:1   app=web,tier in (a,b)",
        "",
      ],
    );
  });

  test("lists devices with a problem first", () => {
    const out = printDevices([
      { name: "a", online: true, state: "Updated", revision: 2, running: 2 },
      {
        name: "b",
        online: true,
        state: "Updating",
        revision: 2,
        running: 1,
        message: "crash-looping",
      },
    ]);
    expect(out.split("\n")[1]).toStartWith("b ");
  });

  test("label arguments set (k=v) and remove (k-) labels; anything else is a usage error", () => {
    expect(parseLabelArgs(["site=a", "old-", "empty="])).toEqual({
      site: "a",
      old: null,
      empty: "",
    });
    expect(() => parseLabelArgs(["site"])).toThrow('invalid label "site": want KEY=VALUE or KEY-');
  });
});
