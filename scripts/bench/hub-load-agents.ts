// One process of simulated agents for scripts/bench/hub-load.ts: protocol-level clients, each
// with its own credential, that send hello, a full node and a pod, then a pod status delta every
// `deltaMs` and heartbeats; they reconnect with exponential backoff and full jitter and resend
// what the hub has not acknowledged. HUB_URLS is one URL or a hub's replicas, comma-separated:
// as the agent does with its list, each round tries the URLs once in a fresh random order, the
// next at once after a connection that ended before its welcome, and backs off between rounds.
// Every 1 s it prints one JSON line of stats on stdout (`openByUrl`: welcomed connections per
// URL of the list).
//
//   bun scripts/bench/hub-load-agents.ts HUB_URLS AGENTS_FILE DELTA_MS RAMP_MS
// AGENTS_FILE: JSON [[nodeName, credential], ...].
import { readFileSync } from "node:fs";
import { agentSocket, reconnectLater } from "./hub-common.ts";

const [hubUrl = "", file = "", deltaArg = "10000", rampArg = "10000"] = process.argv.slice(2);
const deltaMs = Number(deltaArg);
const rampMs = Number(rampArg);
const agents = JSON.parse(readFileSync(file, "utf8")) as [string, string][];
/** As the agent: a connection not welcomed within this is closed and the next URL tried (a
 * replica out of open files leaves connections in its listen backlog, neither open nor closed). */
const WELCOME_TIMEOUT_MS = 10_000;
const wsUrls = hubUrl.split(",").map((u) => `${u.replace(/^http/, "ws")}/api/v1/agent/connect`);

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
  /** The URLs (indexes into wsUrls) left to try in this round. */
  round: number[];
  /** The URL of the current connection, and whether it was welcomed. */
  at: number;
  welcomed: boolean;
}

let latencies: number[] = [];
let errors = 0;
/** Error messages received, by their code. */
const errorCodes: Record<string, number> = {};

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
  // As the agent: nothing but hello before the welcome (what is unacked is resent after it).
  if (s.welcomed && s.ws?.readyState === WebSocket.OPEN) s.ws.send(text);
}

function delta(s: Sim): void {
  s.phase += 1;
  sendSeq(s, { type: "pod.upsert", uid: `pod-${s.name}`, pod: pod(s) });
}

function onMessage(s: Sim, data: string): void {
  const m = JSON.parse(data) as { type: string; seq?: number; ackedSeq?: number; code?: string };
  if (m.type === "welcome") {
    s.welcomes += 1;
    s.welcomed = true;
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
  } else if (m.type === "error") {
    errors += 1;
    errorCodes[m.code ?? "?"] = (errorCodes[m.code ?? "?"] ?? 0) + 1;
  }
}

/** A fresh random order of the URLs (Fisher–Yates). */
function shuffled(): number[] {
  const order = wsUrls.map((_, i) => i);
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [order[i], order[j]] = [order[j] as number, order[i] as number];
  }
  return order;
}

/** Tries the round's next URL; a round that ran out waits its backoff and starts afresh. */
function connect(s: Sim): void {
  const at = s.round.shift();
  if (at === undefined) {
    reconnectLater(s, () => {
      s.round = shuffled();
      connect(s);
    });
    return;
  }
  const ws = agentSocket(wsUrls[at] ?? "", s.credential, { nodeName: s.name, streamId: "bench" });
  s.ws = ws;
  s.at = at;
  s.welcomed = false;
  ws.onmessage = (e) => onMessage(s, String(e.data));
  const timer = setTimeout(() => {
    if (!s.welcomed) ws.close();
  }, WELCOME_TIMEOUT_MS);
  ws.onclose = () => {
    clearTimeout(timer);
    s.ws = undefined;
    // A welcomed connection that ends ends the round, as with the agent.
    if (s.welcomed) s.round = [];
    connect(s);
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
  round: shuffled(),
  at: 0,
  welcomed: false,
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
        if (s.welcomed && s.ws?.readyState === WebSocket.OPEN) s.ws.send('{"type":"hb"}');
      }, deltaMs);
    }, offset);
  }, Math.random() * rampMs);
}

setInterval(() => {
  let open = 0;
  let caughtUp = 0;
  let reconnectedCaughtUp = 0;
  const openByUrl = wsUrls.map(() => 0);
  for (const s of sims) {
    if (s.ws?.readyState === WebSocket.OPEN && s.welcomed) {
      open += 1;
      openByUrl[s.at] = (openByUrl[s.at] ?? 0) + 1;
    }
    if (s.convergedAt >= 1 && s.convergedAt === s.welcomes) caughtUp += 1;
    if (s.convergedAt >= 2 && s.convergedAt === s.welcomes) reconnectedCaughtUp += 1;
  }
  process.stdout.write(
    `${JSON.stringify({ open, openByUrl, caughtUp, reconnectedCaughtUp, errors, errorCodes, latencies })}\n`,
  );
  latencies = [];
}, 1000);
