// One round of scripts/bench/agent-update.ts: the operator's PUT of a node's update, then the
// moments the update passes through, read from the proxy's counts (the download's connection),
// the output of the service loop, the launcher and the agents (log lines carry their own time;
// the others are stamped when they arrive, polled every 20 ms), and the hub's view of the node's
// update (polled every 100 ms).
import type { TestAgent } from "../../test/lib/agent.ts";
import type { TestHub } from "../../test/lib/hub.ts";
import type { ConnCount, CountingProxy } from "./counting-proxy.ts";

/** Milliseconds of each step, in order; they add up to `total`. */
export interface Phases {
  /** The PUT → the download's first byte up (the hub's offer over the WebSocket, the manifest's
   * signature checked). */
  offer: number;
  /** The download's connection, its first byte up after the PUT (the TLS handshake of a new
   * connection, or the request on one the agent kept open from an earlier request to the hub)
   * to its last byte down (the compressed release, inflated and hashed as it arrives). */
  download: number;
  /** The last byte → the agent's "installed" (the rest inflated, size and sha256 checked, the
   * version written and linked on trial). */
  install: number;
  /** "installed" → the launcher exited (the agent stopping). */
  stop: number;
  /** The launcher exited → the new agent's first log line (the unit's RestartSec, the launcher
   * opening the trial, the executable starting). */
  restart: number;
  /** The first log line → the agent tells the launcher it is healthy (runtime, pods synced, the
   * hub reached). */
  trial: number;
  /** Healthy → the launcher closed the trial and the hub shows the node healthy on the version. */
  close: number;
}

export interface RoundResult {
  version: string;
  phases: Phases;
  total: number;
  /** When the hub first showed the update healthy, and the launcher closed the trial (ms from
   * the PUT). */
  hubHealthyAt: number;
  passedAt: number;
  /** The hub's message with its first "healthy" (the agent's). */
  hubMessage: string;
  /** Bytes through the download's connection, both ways, and the server's share. */
  downloadWire: number;
  downloadDown: number;
  /** Bytes through every agent↔hub connection from the PUT to the end, both ways. */
  allWire: number;
  /** Compressed bytes the agent says it fetched ("fetched=" of its "installed" line). */
  fetched: number;
  /** Failed downloads tried again in the round. */
  failures: number;
}

/** What the output said, and when (ms since the epoch). */
interface Marks {
  installed?: number;
  exited?: number;
  started?: number;
  healthy?: number;
  passed?: number;
  fetched?: number;
  /** Downloads that failed and were tried again (after the manager's back-off). */
  failures?: number;
}

const LOG_TIME = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z) /;

/** Reads the new lines of the output into `marks`; throws on a rollback or a failed update. */
function scan(lines: string[], marks: Marks, version: string): void {
  for (const line of lines) {
    const logged = LOG_TIME.exec(line)?.[1];
    const at = logged === undefined ? Date.now() : Date.parse(logged);
    if (/rolled back|agent update refused/.test(line))
      throw new Error(`the update to ${version} did not go through: ${line}`);
    if (/agent update failed/.test(line)) marks.failures = (marks.failures ?? 0) + 1;
    if (marks.installed === undefined && /agent update installed/.test(line)) {
      marks.installed = at;
      marks.fetched = Number(/fetched=(\d+)/.exec(line)?.[1] ?? Number.NaN);
    } else if (marks.installed !== undefined && marks.exited === undefined) {
      if (/^service: the launcher exited/.test(line)) marks.exited = at;
    } else if (marks.exited !== undefined && marks.started === undefined) {
      if (logged !== undefined) marks.started = at;
    }
    if (marks.started !== undefined && /healthy on trial: told the launcher/.test(line))
      marks.healthy ??= at;
    if (new RegExp(`${version}-[0-9a-f]{12} passed its trial`).test(line)) marks.passed ??= at;
  }
}

/** The counts of every connection now (to subtract at the end). */
const snapshot = (conns: readonly ConnCount[]) => conns.map((c) => ({ up: c.up, down: c.down }));

/** The hub's view of the node's update, when it shows `version` healthy and running. */
async function hubHealthy(hub: TestHub, node: string, version: string) {
  const res = await hub.api(`/api/v1/nodes/${node}/update`);
  if (res.status !== 200) return undefined;
  const v = (await res.json()) as { phase?: string; running?: string; message?: string };
  return v.phase === "healthy" && v.running === version ? v : undefined;
}

/** Waits, polling, until the launcher closed the trial and the hub shows the node healthy. */
async function follow(agent: TestAgent, hub: TestHub, version: string, from: number) {
  const marks: Marks = {};
  let seen = from;
  let partial = "";
  let hub200: { at: number; message: string } | undefined;
  let nextHub = 0;
  const deadline = Date.now() + 300_000;
  while (marks.passed === undefined || hub200 === undefined) {
    if (Date.now() > deadline) throw new Error(`the update to ${version} took over 300 s`);
    const text = partial + agent.output.slice(seen);
    seen = agent.output.length;
    const lines = text.split("\n");
    partial = lines.pop() ?? "";
    scan(lines, marks, version);
    if (hub200 === undefined && Date.now() >= nextHub) {
      nextHub = Date.now() + 100;
      const v = await hubHealthy(hub, agent.nodeName, version).catch(() => undefined);
      if (v !== undefined) hub200 = { at: Date.now(), message: v.message ?? "" };
    }
    await Bun.sleep(20);
  }
  return { marks, hub: hub200 };
}

function need(marks: Marks, key: keyof Marks, version: string): number {
  const v = marks[key];
  if (v === undefined) throw new Error(`the update to ${version}: no "${key}" in the output`);
  return v;
}

/** Sets the node's update to `version` and times it until healthy. */
export async function updateRound(
  ctx: { agent: TestAgent; hub: TestHub; proxy: CountingProxy },
  version: string,
): Promise<RoundResult> {
  const { agent, hub, proxy } = ctx;
  const before = snapshot(proxy.conns);
  proxy.mark();
  const from = agent.output.length;
  const t0 = Date.now();
  const res = await hub.api(`/api/v1/nodes/${agent.nodeName}/update`, {
    method: "PUT",
    body: JSON.stringify({ version }),
  });
  if (res.status !== 200)
    throw new Error(`PUT update ${version}: ${res.status} ${await res.text()}`);
  const { marks, hub: seen } = await follow(agent, hub, version, from);
  const end = Math.max(seen.at, need(marks, "passed", version));
  const deltas = proxy.conns.map((c, i) => ({
    c,
    up: c.up - (before[i]?.up ?? 0),
    down: c.down - (before[i]?.down ?? 0),
  }));
  const dl = deltas.reduce((a, b) => (b.down > a.down ? b : a));
  if (dl.c.firstUpAt === undefined || dl.c.lastDownAt === undefined)
    throw new Error("no connection carried a download");
  const installed = need(marks, "installed", version);
  const exited = need(marks, "exited", version);
  const started = need(marks, "started", version);
  const healthy = need(marks, "healthy", version);
  const phases: Phases = {
    offer: dl.c.firstUpAt - t0,
    download: dl.c.lastDownAt - dl.c.firstUpAt,
    install: installed - dl.c.lastDownAt,
    stop: exited - installed,
    restart: started - exited,
    trial: healthy - started,
    close: end - healthy,
  };
  return {
    version,
    phases,
    total: end - t0,
    hubHealthyAt: seen.at - t0,
    passedAt: need(marks, "passed", version) - t0,
    hubMessage: seen.message,
    downloadWire: dl.up + dl.down,
    downloadDown: dl.down,
    allWire: deltas.reduce((n, d) => n + d.up + d.down, 0),
    fetched: marks.fetched ?? Number.NaN,
    failures: marks.failures ?? 0,
  };
}
