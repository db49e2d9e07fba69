// Builders for hub client tests: events, pods and a temp outbox.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openOutbox } from "../../../src/agent/hubclient/index.ts";
import { buildNode } from "../../../src/agent/nodestatus/index.ts";
import type { Event, Pod } from "../../../src/api/types.ts";
import { nullLogger } from "../../../src/util/log.ts";

export function makeEvent(name: string, count = 1): Event {
  return {
    apiVersion: "v1",
    kind: "Event",
    metadata: { name, namespace: "default" },
    involvedObject: { kind: "Pod", name: "web", namespace: "default" },
    reason: "Started",
    message: `event ${name}`,
    type: "Normal",
    source: { component: "fleetlet", host: "cam-1" },
    count,
    firstTimestamp: "2026-01-01T00:00:00Z",
    lastTimestamp: "2026-01-01T00:00:00Z",
  };
}

export function makePod(uid: string, phase: "Pending" | "Running" = "Running"): Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: `web-${uid}`, namespace: "default", uid },
    spec: { containers: [{ name: "web", image: "busybox" }] },
    status: { phase },
  };
}

export function tempDir(): { dir: string; cleanup(): void } {
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-hubclient-"));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

export function outboxAt(dir: string, maxEvents = 1000) {
  return openOutbox({ path: join(dir, "hub", "outbox"), maxEvents, logger: nullLogger });
}

import type { Dial, HubSocket, SocketEvents } from "../../../src/agent/hubclient/index.ts";

/** One fake connection: what the client sent, and hooks to play the hub. */
export interface FakeConn {
  url: string;
  headers: Record<string, string>;
  sent: Record<string, unknown>[];
  /** Binary frames sent (stream data). */
  binary: Uint8Array[];
  closed?: { code?: number; reason?: string };
  events: SocketEvents;
  open(): void;
  receive(msg: unknown): void;
  welcome(ackedSeq?: number, extra?: Record<string, unknown>): void;
}

/** A Dial that records connections instead of opening sockets. */
export function fakeDial(): { dial: Dial; conns: FakeConn[] } {
  const conns: FakeConn[] = [];
  const dial: Dial = (url, headers, events) => {
    const conn: FakeConn = {
      url,
      headers,
      sent: [],
      binary: [],
      events,
      open: () => events.onOpen(),
      receive: (msg) => events.onMessage(typeof msg === "string" ? msg : JSON.stringify(msg)),
      welcome: (ackedSeq = 0, extra = {}) =>
        conn.receive({
          type: "welcome",
          protocolVersion: 1,
          heartbeatIntervalMs: 10_000,
          ackedSeq,
          maxMessageBytes: 1024 * 1024,
          rateLimit: { messagesPerSecond: 100, burst: 1000 },
          ...extra,
        }),
    };
    conns.push(conn);
    const socket: HubSocket = {
      send: (data) => {
        if (typeof data === "string") conn.sent.push(JSON.parse(data) as Record<string, unknown>);
        else conn.binary.push(data);
      },
      close: (code, reason) => {
        conn.closed = {
          ...(code !== undefined && { code }),
          ...(reason !== undefined && { reason }),
        };
      },
      bufferedAmount: () => 0,
    };
    return socket;
  };
  return { dial, conns };
}

/** The node cam-1 as the agent builds it (a 4-core arm64 board). */
export const node = () =>
  buildNode(
    {
      nodeName: "cam-1",
      hostname: "cam-1",
      hostIP: "10.0.0.7",
      machineID: "m",
      systemUUID: "",
      bootID: "b",
      kernelVersion: "6.1",
      osImage: "Linux",
      operatingSystem: "linux",
      architecture: "arm64",
      kubeletVersion: "fleetlet/0.1.0",
      cpuCores: 4,
      cpuModel: "",
      memoryBytes: 1024 ** 3,
      maxPods: 110,
      configLabels: {},
    },
    { runtimeHealthy: true, runtimeReasons: [], runtimeVersion: "", ephemeralStorageBytes: 0 },
    Date.UTC(2026, 0, 1),
    undefined,
  );
