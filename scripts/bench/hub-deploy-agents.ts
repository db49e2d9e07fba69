// One process of simulated devices for scripts/bench/hub-deploy.ts: protocol-level agents that
// announce that they run hub pods, and do what an agent does with a desired state (without
// containers): acknowledge it, then report each of its pods Running and Ready. They reconnect
// with exponential backoff and full jitter. Every 1 s it prints one JSON line of stats.
//
//   bun scripts/bench/hub-deploy-agents.ts HUB_URL AGENTS_FILE RAMP_MS
// AGENTS_FILE: JSON [[nodeName, credential], ...].
import { readFileSync } from "node:fs";
import { agentSocket, reconnectLater } from "./hub-common.ts";

const [hubUrl = "", file = "", rampArg = "10000"] = process.argv.slice(2);
const agents = JSON.parse(readFileSync(file, "utf8")) as [string, string][];
const wsUrl = `${hubUrl.replace(/^http/, "ws")}/api/v1/agent/connect`;

interface Sim {
  name: string;
  credential: string;
  ws?: WebSocket;
  seq: number;
  welcomed: boolean;
  attempt: number;
  /** The generation last acknowledged, and whether it held a pod. */
  generation: number;
  running: boolean;
}

let errors = 0;
/** Milliseconds since the epoch when each device acknowledged a state with a pod. */
const ackTimes: number[] = [];

function onDesired(s: Sim, m: { generation: number; pods: { metadata: { uid: string } }[] }): void {
  s.generation = m.generation;
  s.ws?.send(JSON.stringify({ type: "desired.ack", generation: m.generation }));
  if (m.pods.length > 0 && !s.running) ackTimes.push(Date.now());
  s.running = m.pods.length > 0;
  for (const pod of m.pods) {
    s.seq += 1;
    const status = { phase: "Running", conditions: [{ type: "Ready", status: "True" }] };
    s.ws?.send(
      JSON.stringify({
        type: "pod.upsert",
        seq: s.seq,
        uid: pod.metadata.uid,
        pod: { ...pod, status },
      }),
    );
  }
}

function connect(s: Sim): void {
  const ws = agentSocket(wsUrl, s.credential, {
    nodeName: s.name,
    streamId: `bench-${s.name}`,
    lastAckedSeq: s.seq,
    desiredGeneration: s.generation,
    features: ["desired-pods"],
  });
  s.ws = ws;
  ws.onmessage = (e) => {
    const m = JSON.parse(String(e.data));
    if (m.type === "welcome") {
      s.welcomed = true;
      s.attempt = 0;
    } else if (m.type === "desired") onDesired(s, m);
    else if (m.type === "error") errors += 1;
  };
  ws.onclose = () => {
    s.ws = undefined;
    s.welcomed = false;
    reconnectLater(s, () => connect(s));
  };
}

const sims: Sim[] = agents.map(([name, credential]) => ({
  name,
  credential,
  seq: 0,
  welcomed: false,
  attempt: 0,
  generation: 0,
  running: false,
}));
for (const s of sims) setTimeout(() => connect(s), Math.random() * Number(rampArg));
setInterval(() => {
  const open = sims.filter((s) => s.welcomed).length;
  const running = sims.filter((s) => s.running).length;
  const last = ackTimes.length === 0 ? 0 : Math.max(...ackTimes);
  process.stdout.write(`${JSON.stringify({ open, running, lastAckAt: last, errors })}\n`);
}, 1000);
