import { describe, expect, test } from "bun:test";
import type { Node } from "../../../src/api/node.ts";
import type { ContainerStatus, Event, Pod } from "../../../src/api/types.ts";
import { describePod, describeProbe } from "../../../src/cli/describe.ts";
import { printNodeTable as printHubNodeTable } from "../../../src/cli/hub.ts";
import {
  PodWatchTable,
  podColumns,
  printEventTable,
  printObjects,
  printPodTable,
} from "../../../src/cli/printers.ts";
import { alignTabs, TABLE } from "../../../src/cli/tabwriter.ts";
import { HUB_ANNOTATIONS } from "../../../src/protocol/index.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";
import { runningStatus } from "../server/fixtures.ts";

const now = Date.parse("2024-01-01T01:00:00Z");

function withStatuses(
  app: ContainerStatus[],
  o: Partial<Pod["status"]> = {},
  init?: ContainerStatus[],
): Pod {
  const names = app.map((s) => s.name);
  return makePod({
    containers: names.map((name) => makeContainer({ name })),
    ...(init && { initContainers: init.map((s) => makeContainer({ name: s.name })) }),
    status: {
      phase: "Running",
      containerStatuses: app,
      ...(init && { initContainerStatuses: init }),
      ...o,
    },
  });
}

const waiting = (name: string, reason: string, o: Partial<ContainerStatus> = {}) =>
  runningStatus(name, { state: { waiting: { reason } }, ready: false, ...o });
const terminated = (name: string, reason: string, exitCode: number) =>
  runningStatus(name, { state: { terminated: { exitCode, reason } }, ready: false });

describe("podColumns()", () => {
  test.each<[string, Pod, string, string]>([
    ["Running", withStatuses([runningStatus("a"), runningStatus("b")]), "Running", "2/2"],
    [
      "CrashLoopBackOff",
      withStatuses([waiting("a", "CrashLoopBackOff")]),
      "CrashLoopBackOff",
      "0/1",
    ],
    [
      "Completed",
      withStatuses([terminated("a", "Completed", 0)], { phase: "Succeeded" }),
      "Completed",
      "0/1",
    ],
    ["Error", withStatuses([terminated("a", "Error", 1)], { phase: "Failed" }), "Error", "0/1"],
    ["OOMKilled", withStatuses([terminated("a", "OOMKilled", 137)]), "OOMKilled", "0/1"],
    [
      "NotReady (one completed, one running, pod not Ready)",
      withStatuses([terminated("a", "Completed", 0), runningStatus("b")]),
      "NotReady",
      "1/2",
    ],
    [
      "Init:1/2",
      withStatuses([waiting("a", "PodInitializing")], { phase: "Pending" }, [
        terminated("i1", "Completed", 0),
        runningStatus("i2", { ready: false }),
      ]),
      "Init:1/2",
      "0/1",
    ],
    [
      "Init:CrashLoopBackOff",
      withStatuses([waiting("a", "PodInitializing")], { phase: "Pending" }, [
        waiting("i1", "CrashLoopBackOff"),
      ]),
      "Init:CrashLoopBackOff",
      "0/1",
    ],
    [
      "PodInitializing",
      withStatuses([waiting("a", "PodInitializing")], { phase: "Pending" }, [
        terminated("i1", "Completed", 0),
      ]),
      "PodInitializing",
      "0/1",
    ],
  ])("STATUS of a pod that is %s", (_name, pod, status, ready) => {
    const c = podColumns(pod, now);
    expect(c.status).toBe(status);
    expect(c.ready).toBe(ready);
  });

  test("STATUS is Terminating once the pod has a deletionTimestamp", () => {
    const pod = withStatuses([runningStatus("a")]);
    pod.metadata.deletionTimestamp = "2024-01-01T00:59:00Z";
    expect(podColumns(pod, now).status).toBe("Terminating");
  });

  test("RESTARTS shows the count and how long ago the last container finished", () => {
    const pod = withStatuses([
      runningStatus("a", {
        restartCount: 3,
        lastState: { terminated: { exitCode: 1, finishedAt: "2024-01-01T00:59:50Z" } },
      }),
    ]);
    expect(podColumns(pod, now).restarts).toBe("3 (10s ago)");
    expect(podColumns(withStatuses([runningStatus("a")]), now).restarts).toBe("0");
  });
});

describe("printPodTable()", () => {
  const web = withStatuses([runningStatus("app")], {
    podIP: "10.0.0.7",
    podIPs: [{ ip: "10.0.0.7" }],
  });
  web.spec.nodeName = "dev1";

  test("aligns NAME READY STATUS RESTARTS AGE like kubectl's tabwriter", () => {
    expect(printPodTable([web], now)).toBe(
      "NAME   READY   STATUS    RESTARTS   AGE\nweb    1/1     Running   0          60m\n",
    );
  });

  test("wide adds IP, NODE, NOMINATED NODE and READINESS GATES; all namespaces adds NAMESPACE first", () => {
    const out = printPodTable([web], now, { wide: true, withNamespace: true });
    expect(out.split("\n")[0]).toBe(
      "NAMESPACE   NAME   READY   STATUS    RESTARTS   AGE   IP         NODE   NOMINATED NODE   READINESS GATES",
    );
    expect(out.split("\n")[1]).toBe(
      "default     web    1/1     Running   0          60m   10.0.0.7   dev1   <none>           <none>",
    );
  });
});

describe("PodWatchTable", () => {
  test("prints the header before the first row only; first rows align as the table would", () => {
    const web = withStatuses([runningStatus("app")]);
    const rows = new PodWatchTable();
    const first = rows.row(web, now);
    expect(first).toBe(printPodTable([web], now));
    expect(rows.row(web, now)).toBe("web    1/1     Running   0          60m\n");
  });

  test("a wider cell widens its column from then on, never narrows it", () => {
    const short = withStatuses([runningStatus("app")]);
    const long = withStatuses([runningStatus("app")], {});
    long.metadata.name = "a-much-longer-name";
    const rows = new PodWatchTable();
    rows.row(short, now);
    expect(rows.row(long, now)).toBe("a-much-longer-name   1/1     Running   0          60m\n");
    expect(rows.row(short, now)).toBe("web                  1/1     Running   0          60m\n");
  });
});

const event = (o: Partial<Event>): Event => ({
  apiVersion: "v1",
  kind: "Event",
  metadata: { name: "web.1", namespace: "default" },
  involvedObject: { kind: "Pod", name: "web", namespace: "default" },
  reason: "Started",
  message: "Started container app",
  type: "Normal",
  source: { component: "fleetlet", host: "dev1" },
  count: 1,
  firstTimestamp: "2024-01-01T00:59:00Z",
  lastTimestamp: "2024-01-01T00:59:00Z",
  ...o,
});

describe("printEventTable()", () => {
  test("prints LAST SEEN TYPE REASON OBJECT MESSAGE, oldest first", () => {
    const out = printEventTable(
      [
        event({
          reason: "BackOff",
          type: "Warning",
          lastTimestamp: "2024-01-01T00:59:59Z",
          message: "Back-off",
        }),
        event({}),
      ],
      now,
    );
    expect(out).toBe(
      [
        "LAST SEEN   TYPE      REASON    OBJECT    MESSAGE",
        "60s         Normal    Started   pod/web   Started container app",
        "1s          Warning   BackOff   pod/web   Back-off",
        "",
      ].join("\n"),
    );
  });
});

describe("describePod()", () => {
  const pod = makePod({
    name: "web",
    labels: { app: "web", tier: "front" },
    containers: [
      makeContainer({
        name: "app",
        image: "nginx:1.25",
        ports: [{ containerPort: 80, protocol: "TCP" }],
        livenessProbe: { httpGet: { path: "/healthz", port: 8080 }, periodSeconds: 5 },
        readinessProbe: { exec: { command: ["cat", "/tmp/ready"] } },
      }),
    ],
    spec: { nodeName: "dev1" },
    status: {
      phase: "Running",
      hostIP: "192.168.1.5",
      podIP: "10.0.0.7",
      podIPs: [{ ip: "10.0.0.7" }],
      startTime: "2024-01-01T00:00:00Z",
      qosClass: "BestEffort",
      conditions: [
        { type: "Initialized", status: "True" },
        { type: "Ready", status: "True" },
      ],
      containerStatuses: [
        runningStatus("app", {
          restartCount: 2,
          lastState: {
            terminated: {
              exitCode: 137,
              reason: "OOMKilled",
              startedAt: "2024-01-01T00:10:00Z",
              finishedAt: "2024-01-01T00:20:00Z",
            },
          },
        }),
      ],
    },
  });
  const out = describePod(pod, [event({ count: 3, firstTimestamp: "2024-01-01T00:50:00Z" })], now);

  test("prints a waiting container's reason and message (a pull's figures)", () => {
    const message = 'Pulling image "nginx:1.25": 3.0 MiB of 8.0 MiB';
    const pulling = withStatuses([
      runningStatus("app", { state: { waiting: { reason: "ContainerCreating", message } } }),
    ]);
    expect(describePod(pulling, [], now)).toContain(
      `    State:          Waiting\n      Reason:       ContainerCreating\n      Message:      ${message}\n`,
    );
  });

  test("prints the header fields aligned, as kubectl describe", () => {
    expect(out).toContain("Name:         web\n");
    expect(out).toContain("Namespace:    default\n");
    expect(out).toContain("Node:         dev1/192.168.1.5\n");
    expect(out).toContain("Start Time:   Mon, 01 Jan 2024 00:00:00 +0000\n");
    expect(out).toContain("Labels:       app=web\n              tier=front\n");
    expect(out).toContain("Annotations:  <none>\n");
    expect(out).toContain("Status:       Running\n");
    expect(out).toContain("IP:           10.0.0.7\n");
  });

  test("prints each container's state, last state, ready, restarts, image and probes", () => {
    for (const line of [
      "Containers:\n  app:\n",
      "    Container ID:   containerd://app-id\n",
      "    Image:          nginx:1.25\n",
      "    Image ID:       docker.io/library/busybox@sha256:abc\n",
      "    Port:           80/TCP\n",
      "    State:          Running\n      Started:      Mon, 01 Jan 2024 00:00:10 +0000\n",
      "    Last State:     Terminated\n      Reason:       OOMKilled\n      Exit Code:    137\n",
      "    Ready:          True\n",
      "    Restart Count:  2\n",
      "    Liveness:       http-get http://:8080/healthz delay=0s timeout=1s period=5s #success=1 #failure=3\n",
      "    Readiness:      exec [cat /tmp/ready] delay=0s timeout=1s period=10s #success=1 #failure=3\n",
    ]) {
      expect(out).toContain(line);
    }
  });

  test("prints a container's devices per resource, naming the unhealthy ones", () => {
    const withDevices = structuredClone(pod);
    const status = withDevices.status?.containerStatuses?.[0];
    if (status === undefined) throw new Error("the fixture has a container status");
    status.allocatedResourcesStatus = [
      {
        name: "fleetlet.io/serial",
        resources: [
          { resourceID: "/dev/ttyUSB0", health: "Healthy" },
          { resourceID: "/dev/ttyUSB1", health: "Unhealthy" },
        ],
      },
    ];
    const text = describePod(withDevices, [], now);
    expect(text).toContain(
      "    Devices:\n      fleetlet.io/serial:  /dev/ttyUSB0, /dev/ttyUSB1 (Unhealthy)\n",
    );
    expect(out).not.toContain("Devices:");
  });

  test("prints the Conditions table and the Events table with repeat counts", () => {
    // As in kubectl, the rows share a tabwriter block with the "Volumes:\t<none>" line after them.
    expect(out).toContain(
      "Conditions:\n  Type           Status\n  Initialized    True \n  Ready          True \n",
    );
    expect(out).toContain(
      "Events:\n  Type    Reason   Age                From      Message\n" +
        "  ----    ------   ----               ----      -------\n" +
        "  Normal  Started  60s (x3 over 10m)  fleetlet  Started container app\n",
    );
    expect(describePod(makePod(), [], now)).toMatch(/\nEvents: +<none>\n$/);
  });

  test("prints configMap, secret, downwardAPI and projected volumes as kubectl", () => {
    const text = describePod(
      makePod({
        spec: {
          containers: [],
          volumes: [
            { name: "cfg", configMap: { name: "app" } },
            { name: "sec", secret: { secretName: "creds", optional: true } },
            {
              name: "info",
              downwardAPI: {
                items: [
                  { path: "labels", fieldRef: { fieldPath: "metadata.labels" } },
                  {
                    path: "mem",
                    resourceFieldRef: { containerName: "app", resource: "limits.memory" },
                  },
                ],
              },
            },
            {
              name: "proj",
              projected: {
                sources: [
                  { configMap: { name: "app" } },
                  { secret: { name: "creds", optional: false } },
                  { downwardAPI: {} },
                ],
              },
            },
          ],
        },
      }),
      [],
      now,
    );
    for (const line of [
      "  cfg:\n    Type:      ConfigMap (a volume populated by a ConfigMap)\n    Name:      app\n    Optional:  false\n",
      "    SecretName:  creds\n    Optional:    true\n",
      "    Items:\n      metadata.labels -> labels\n      limits.memory -> mem\n",
      "    ConfigMapName:       app\n    ConfigMapOptional:   <nil>\n    SecretName:          creds\n    SecretOptionalName:  false\n    DownwardAPI:         true\n",
    ]) {
      expect(text).toContain(line);
    }
  });

  test("describeProbe() prints tcp-socket and grpc probes as kubectl", () => {
    expect(describeProbe({ tcpSocket: { port: 22 } })).toBe(
      "tcp-socket :22 delay=0s timeout=1s period=10s #success=1 #failure=3",
    );
    expect(describeProbe({ grpc: { port: 9000, service: "x" }, failureThreshold: 5 })).toContain(
      "grpc <pod>:9000 x delay=0s",
    );
  });
});

describe("printObjects() and alignTabs()", () => {
  test("prints several objects as a kubectl List in json and yaml", () => {
    const json = JSON.parse(printObjects([{ a: 1 }], "json"));
    expect(json).toEqual({
      apiVersion: "v1",
      items: [{ a: 1 }],
      kind: "List",
      metadata: { resourceVersion: "" },
    });
    expect(printObjects({ kind: "Pod" }, "yaml")).toBe("kind: Pod\n");
  });

  test("alignTabs() pads each column to its widest cell plus padding, minimum width 6", () => {
    expect(alignTabs("a\tbb\tc\nlonger\tb\tc\n", TABLE)).toBe(
      "a        bb    c\nlonger   b     c\n",
    );
  });
});

describe("the hub's `get nodes` table", () => {
  const node = (
    name: string,
    conditions: [string, string][],
    annotations: Record<string, string> = {},
  ) =>
    ({
      apiVersion: "v1",
      kind: "Node",
      metadata: { name, annotations, creationTimestamp: "2024-01-01T00:00:00Z" },
      spec: {},
      status: { conditions: conditions.map(([type, status]) => ({ type, status })) },
    }) as unknown as Node;

  test("STATUS flags each pressure condition that is True, after Ready and Revoked", () => {
    const out = printHubNodeTable(
      [
        node("calm", [
          ["Ready", "True"],
          ["MemoryPressure", "False"],
        ]),
        node("full", [
          ["Ready", "True"],
          ["DiskPressure", "True"],
          ["PIDPressure", "True"],
        ]),
        node(
          "gone",
          [
            ["Ready", "False"],
            ["MemoryPressure", "True"],
          ],
          {
            [HUB_ANNOTATIONS.revoked]: "2024-01-01T00:30:00Z",
          },
        ),
      ],
      now,
    );
    const status = (name: string) =>
      out
        .split("\n")
        .find((l) => l.startsWith(name))
        ?.split(/\s+/)[1];
    expect(status("calm")).toBe("Ready");
    expect(status("full")).toBe("Ready,DiskPressure,PIDPressure");
    expect(status("gone")).toBe("NotReady,Revoked,MemoryPressure");
  });
});
