// What must hold after each quiet period of a soak, checked against the device's own parts
// (containerd, cgroupfs, the root dir) and the hub directly, never against the agent alone:
// - every wanted pod runs exactly once, at the version the model expects: one ready sandbox;
// - nothing else runs: no ready sandbox, running container, pod cgroup or pod folder of a pod
//   that is not wanted;
// - no container of a pod whose kind never restarts has restarted or changed (unless the agent
//   was killed while it started it: then containerd cancels the start, and it starts again);
// - the hub's view of the node's pods equals the device's;
// - the agent's memory and open files stay under their bounds.
// Each check returns the differences it found, as text; none means it holds.
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import type { Pod } from "../../../src/api/types.ts";
import { createCriClient } from "../../../src/cri/index.ts";
import { mayRestart, type WantedPod } from "./workload.ts";
import type { SoakWorld } from "./world.ts";

export interface Bounds {
  rssBytes: number;
  openFiles: number;
}

/** What one check saw: the differences, and the pods (by full name) with their uids. */
interface CheckResult {
  differences: string[];
  uids: Map<string, string>;
}

/** What was last accepted of a pod that must never restart, by pod uid: its container and
 * restart count. */
export type FirstContainers = Map<string, { id: string; restarts: number }>;

/** What happened in the round being checked that may cut a container's start. */
interface RoundFaults {
  agentKilled: boolean;
  runtimeKilled: boolean;
}

/**
 * Why a new container of a pod that never restarts has a reason after all, or undefined. Its
 * previous instance never ran because its start was cut: the agent killed while starting it
 * (containerd cancelled the start, StartError "context canceled"), or containerd killed while
 * the agent's StartContainer was in flight (the instance stays created, never started: its last
 * state says nothing ran), or while its CreateContainer was (containerd, back, reports the
 * created instance whose task it lost as exited 255 "Unknown", with no start time). The next
 * sync started a new attempt, as the kubelet does.
 */
function startCut(
  cs: NonNullable<Pod["status"]>["containerStatuses"],
  round: RoundFaults,
): string | undefined {
  const last = cs?.[0]?.lastState;
  const t = last?.terminated;
  if (round.agentKilled && t?.reason === "StartError" && /context canceled/.test(t.message ?? ""))
    return "a start cut by the agent's kill, started again";
  const neverRan = last?.running === undefined && t === undefined;
  const once = (cs?.[0]?.restartCount ?? 0) === 1;
  if (round.runtimeKilled && neverRan && once)
    return "a start cut by containerd's kill, started again";
  const lost = t?.exitCode === 255 && t.reason === "Unknown" && t.startedAt === undefined;
  if (round.runtimeKilled && lost && once)
    return "a container made but never started when containerd was killed, started again";
  return undefined;
}

function podGen(p: Pod): number {
  return Number(p.metadata.labels?.["soak-gen"] ?? "-1");
}

/** The agent's pods against the model: the wanted ones present at their version, no other. */
function checkAgentPods(
  pods: Pod[],
  wanted: Map<string, WantedPod>,
  first: FirstContainers,
  round: RoundFaults,
  excused: string[],
): CheckResult {
  const differences: string[] = [];
  const uids = new Map<string, string>();
  const byName = new Map(pods.map((p) => [p.metadata.name, p]));
  for (const w of wanted.values()) {
    const p = byName.get(w.fullName);
    if (p === undefined) {
      differences.push(`pod ${w.fullName} (gen ${w.gen}) is wanted but the agent has none`);
      continue;
    }
    if (podGen(p) !== w.gen)
      differences.push(`pod ${w.fullName} is at gen ${podGen(p)}, wanted ${w.gen}`);
    uids.set(w.fullName, p.metadata.uid ?? "");
    const cs = p.status?.containerStatuses?.[0];
    if (p.status?.phase !== "Running" || cs === undefined) {
      differences.push(`pod ${w.fullName} is ${p.status?.phase ?? "without status"}`);
      continue;
    }
    if (mayRestart(w.kind)) continue;
    if (cs.state?.running === undefined) {
      differences.push(`pod ${w.fullName} (${w.kind}) is not running: ${JSON.stringify(cs.state)}`);
      continue;
    }
    const uid = p.metadata.uid ?? "";
    const now = { id: cs.containerID ?? "", restarts: cs.restartCount ?? 0 };
    const before = first.get(uid) ?? { id: now.id, restarts: 0 };
    if (now.id === before.id && now.restarts === before.restarts) first.set(uid, now);
    else if (startCut(p.status?.containerStatuses, round) !== undefined) {
      first.set(uid, now);
      excused.push(`${w.fullName}: ${startCut(p.status?.containerStatuses, round)}`);
    } else
      differences.push(
        `pod ${w.fullName} (${w.kind}) restarted: container ${now.id} restartCount ${now.restarts}, was ${before.id} ${before.restarts}; last state ${JSON.stringify(cs.lastState)}`,
      );
  }
  for (const p of pods)
    if (!wanted.has(p.metadata.name))
      differences.push(`pod ${p.metadata.name} (gen ${podGen(p)}) is not wanted but still known`);
  return { differences, uids };
}

/** containerd's sandboxes and containers of the node against the wanted pods' uids. */
async function checkRuntime(world: SoakWorld, uids: Set<string>): Promise<string[]> {
  const differences: string[] = [];
  const cri = createCriClient({ endpoint: world.containerd.endpoint });
  try {
    const node = { "io.fleetlet.node": world.agent.nodeName };
    const sandboxes = (await cri.listPodSandbox({ filter: { labelSelector: node } })).items;
    const ready = sandboxes.filter((s) => s.state === "SANDBOX_READY");
    const count = new Map<string, number>();
    for (const s of ready) {
      const uid = s.metadata?.uid ?? "";
      count.set(uid, (count.get(uid) ?? 0) + 1);
      if (!uids.has(uid))
        differences.push(
          `a ready sandbox ${s.id.slice(0, 12)} of ${s.metadata?.name} is not wanted`,
        );
    }
    for (const uid of uids) {
      const n = count.get(uid) ?? 0;
      if (n !== 1) differences.push(`pod uid ${uid} has ${n} ready sandboxes, wanted 1`);
    }
    const readyIds = new Set(ready.filter((s) => uids.has(s.metadata?.uid ?? "")).map((s) => s.id));
    const state = { state: "CONTAINER_RUNNING" as const };
    const running = (await cri.listContainers({ filter: { state } })).containers;
    for (const c of running) {
      const sb = sandboxes.find((s) => s.id === c.podSandboxId);
      if (sb === undefined) continue; // another node's
      if (!readyIds.has(c.podSandboxId))
        differences.push(`container ${c.id.slice(0, 12)} of ${sb.metadata?.name} runs, not wanted`);
    }
  } finally {
    cri.close();
  }
  return differences;
}

/** Pod cgroups (pod<uid>) under the agent's cgroup root in the memory hierarchy, and pod folders
 * under its root dir, of pods that are not wanted. */
function checkLeftovers(world: SoakWorld, uids: Set<string>): string[] {
  const differences: string[] = [];
  const walk = (dir: string, depth: number): void => {
    if (depth > 4 || !existsSync(dir)) return;
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (!e.isDirectory()) continue;
      const m = /^pod([0-9a-f-]{36})$/.exec(e.name);
      if (m?.[1] !== undefined) {
        if (!uids.has(m[1])) differences.push(`a pod cgroup ${join(dir, e.name)} is left over`);
      } else walk(join(dir, e.name), depth + 1);
    }
  };
  const hierarchy = existsSync("/sys/fs/cgroup/memory")
    ? "/sys/fs/cgroup/memory"
    : "/sys/fs/cgroup";
  walk(join(hierarchy, world.agent.cgroupRoot), 0);
  const podsDir = join(world.agent.rootDir, "pods");
  if (existsSync(podsDir))
    for (const uid of readdirSync(podsDir))
      if (!uids.has(uid)) differences.push(`a pod folder ${join(podsDir, uid)} is left over`);
  return differences;
}

/** The hub's pods of the node against the agent's: the same names, uids and phases. */
async function checkHub(world: SoakWorld, agentPods: Pod[]): Promise<string[]> {
  const node = world.agent.nodeName;
  const res = await world.hub.api(`/api/v1/pods?fieldSelector=spec.nodeName%3D${node}`);
  if (res.status !== 200) return [`the hub answered GET pods with ${res.status}`];
  const hubPods = ((await res.json()) as { items: Pod[] }).items;
  const key = (p: Pod) => `${p.metadata.name} ${p.metadata.uid} ${p.status?.phase}`;
  const device = new Set(agentPods.map(key));
  const hub = new Set(hubPods.map(key));
  const differences: string[] = [];
  for (const k of device) if (!hub.has(k)) differences.push(`the hub lacks pod ${k}`);
  for (const k of hub)
    if (!device.has(k)) differences.push(`the hub shows pod ${k}, the device not`);
  return differences;
}

/** Every check once; the differences found (none: all hold). */
export async function checkOnce(
  world: SoakWorld,
  wanted: Map<string, WantedPod>,
  first: FirstContainers,
  bounds: Bounds,
  round: RoundFaults & { excused: string[] },
): Promise<string[]> {
  const pods = await world.agent.pods();
  const agent = checkAgentPods(pods, wanted, first, round, round.excused);
  const uids = new Set(agent.uids.values());
  const differences = [
    ...agent.differences,
    ...(await checkRuntime(world, uids)),
    ...checkLeftovers(world, uids),
    ...(await checkHub(world, pods)),
  ];
  const used = world.agentResources();
  if (used === undefined) differences.push("the agent is not running");
  else {
    if (used.rss > bounds.rssBytes)
      differences.push(`the agent's RSS ${used.rss} B is over ${bounds.rssBytes} B`);
    if (used.fds > bounds.openFiles)
      differences.push(`the agent holds ${used.fds} open files, over ${bounds.openFiles}`);
  }
  return differences;
}
