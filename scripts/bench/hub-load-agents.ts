// One process of simulated agents for scripts/bench/hub-load.ts: protocol-level clients, each
// with its own credential, that send hello, a full node and a pod, then a pod status delta every
// `deltaMs` and heartbeats; they reconnect with exponential backoff and full jitter and resend
// what the hub has not acknowledged. Every 1 s it prints one JSON line of stats on stdout.
//
//   bun scripts/bench/hub-load-agents.ts HUB_URL AGENTS_FILE DELTA_MS RAMP_MS
// AGENTS_FILE: JSON [[nodeName, credential], ...].
import { readFileSync } from "node:fs";
import { agentSocket, reconnectLater } from "./hub-common.ts";

const [hubUrl = "", file = "", deltaArg = "10000", rampArg = "10000"] = process.argv.slice(2);
const deltaMs = Number(deltaArg);
const rampMs = Number(rampArg);
const agents = JSON.parse(readFileSync(file, "utf8")) as [string, string][];
const wsUrl = `${hubUrl.replace(/^http/, "ws")}/api/v1/agent/connect`;

interface Sim {
  name: string;
  credential: string;
  ws?: WebSocket;
  seq: number;
  /** seq → [send time, message] not yet acknowledged. */
  unacked: Map<number, [number, string]>;
  welcomes: number;
  attempt: number;
  /** The last seq sent in answer to the last welcome (the resend and the full report). */
  welcomeSeq: number;
  /** The welcome count whose answer the hub has acknowledged in full. */
  convergedAt: number;
  phase: number;
}

let latencies: number[] = [];
let errors = 0;

function node(name: string) {
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: { name, labels: { "kubernetes.io/hostname": name } },
    spec: {},
    status: {
      capacity: { cpu: "4", memory: "4Gi", pods: "110" },
      conditions: [{ type: "Ready", status: "True", reason: "KubeletReady" }],
      nodeInfo: {
        machineID: "m",
        systemUUID: "u",
        bootID: "b",
        kernelVersion: "6.1",
        osImage: "Debian",
        containerRuntimeVersion: "containerd://1.6.20",
        kubeletVersion: "fleetlet/bench",
        kubeProxyVersion: "",
        operatingSystem: "linux",
        architecture: "arm64",
      },
    },
  };
}

function pod(s: Sim) {
  const uid = `pod-${s.name}`;
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: `cam-${s.name}`, namespace: "default", uid },
    spec: { nodeName: s.name, containers: [{ name: "app", image: "busybox" }] },
    status: {
      phase: "Running",
      containerStatuses: [
        {
          name: "app",
          state: { running: { startedAt: "2026-01-01T00:00:00Z" } },
          lastState: {},
          ready: s.phase % 2 === 0,
          restartCount: s.phase,
          image: "busybox",
          imageID: "sha256:x",
        },
      ],
    },
  };
}

function sendSeq(s: Sim, body: Record<string, unknown>): void {
  s.seq += 1;
  const text = JSON.stringify({ ...body, seq: s.seq });
  s.unacked.set(s.seq, [performance.now(), text]);
  if (s.ws?.readyState === WebSocket.OPEN) s.ws.send(text);
}

function delta(s: Sim): void {
  s.phase += 1;
  sendSeq(s, { type: "pod.upsert", uid: `pod-${s.name}`, pod: pod(s) });
}

function onMessage(s: Sim, data: string): void {
  const m = JSON.parse(data) as { type: string; seq?: number; ackedSeq?: number; code?: string };
  if (m.type === "welcome") {
    s.welcomes += 1;
    s.attempt = 0;
    for (const k of [...s.unacked.keys()]) if (k <= (m.ackedSeq ?? 0)) s.unacked.delete(k);
    for (const [, text] of s.unacked.values()) s.ws?.send(text);
    sendSeq(s, { type: "node", node: node(s.name) });
    delta(s);
    s.welcomeSeq = s.seq;
  } else if (m.type === "ack" && m.seq !== undefined) {
    const now = performance.now();
    for (const [k, [t]] of s.unacked) {
      if (k > m.seq) continue;
      latencies.push(now - t);
      s.unacked.delete(k);
    }
    if (m.seq >= s.welcomeSeq) s.convergedAt = s.welcomes;
  } else if (m.type === "error") errors += 1;
}

function connect(s: Sim): void {
  const ws = agentSocket(wsUrl, s.credential, { nodeName: s.name, streamId: "bench" });
  s.ws = ws;
  ws.onmessage = (e) => onMessage(s, String(e.data));
  ws.onclose = () => {
    s.ws = undefined;
    reconnectLater(s, () => connect(s));
  };
}

const sims: Sim[] = agents.map(([name, credential]) => ({
  name,
  credential,
  seq: 0,
  unacked: new Map(),
  welcomes: 0,
  attempt: 0,
  welcomeSeq: Number.MAX_SAFE_INTEGER,
  convergedAt: 0,
  phase: 0,
}));

for (const s of sims) {
  setTimeout(() => {
    connect(s);
    const offset = Math.random() * deltaMs;
    setTimeout(() => {
      setInterval(() => {
        if (s.ws?.readyState === WebSocket.OPEN) delta(s);
      }, deltaMs);
      setInterval(() => {
        if (s.ws?.readyState === WebSocket.OPEN) s.ws.send('{"type":"hb"}');
      }, deltaMs);
    }, offset);
  }, Math.random() * rampMs);
}

setInterval(() => {
  let open = 0;
  let caughtUp = 0;
  let reconnectedCaughtUp = 0;
  for (const s of sims) {
    if (s.ws?.readyState === WebSocket.OPEN && s.welcomes > 0) open += 1;
    if (s.convergedAt >= 1 && s.convergedAt === s.welcomes) caughtUp += 1;
    if (s.convergedAt >= 2 && s.convergedAt === s.welcomes) reconnectedCaughtUp += 1;
  }
  process.stdout.write(
    `${JSON.stringify({ open, caughtUp, reconnectedCaughtUp, errors, latencies })}\n`,
  );
  latencies = [];
}, 1000);
