// Helpers of the eviction tests: what this machine has right now (measured as the agent
// measures it, so thresholds can be set relative to it), manifests of pods that use memory,
// disk, inodes or processes for real, and reading the agent's node and events.
import { existsSync } from "node:fs";
import { nodeMemory, pids, readMeminfo } from "../../src/agent/eviction/observe.ts";
import type { Node } from "../../src/api/node.ts";
import type { Event, Pod } from "../../src/api/types.ts";
import type { TestAgent } from "./agent.ts";

export const Mi = 2 ** 20;
export const Gi = 2 ** 30;

/** memory.available now, as the agent computes it on this host (the cgroup v1 memory root, the
 * cgroup v2 root, else meminfo alone). */
export function memoryAvailable(): number {
  const v1 = "/sys/fs/cgroup/memory";
  const v2 = "/sys/fs/cgroup";
  const root = existsSync(`${v1}/memory.usage_in_bytes`)
    ? { version: 1 as const, dir: v1 }
    : existsSync(`${v2}/cgroup.controllers`)
      ? { version: 2 as const, dir: v2 }
      : undefined;
  return nodeMemory(root).available;
}

export const memoryTotal = (): number => readMeminfo().total;

/** pid.available now. */
export const pidsAvailable = (): number => pids().available;

export interface PodOptions {
  priority?: number;
  priorityClassName?: string;
  /** The container's shell script. */
  script: string;
  requests?: Record<string, string>;
  limits?: Record<string, string>;
  /** emptyDir volume "data" mounted at /data, with this sizeLimit ("" for none). */
  emptyDir?: string;
  tolerations?: string;
}

/** A one-container pod "main" running `script` under sh, stopped with a 1 s grace period. */
export function podManifest(agent: TestAgent, name: string, o: PodOptions): string {
  const resources: string[] = [];
  if (o.requests) resources.push(`requests: ${JSON.stringify(o.requests)}`);
  if (o.limits) resources.push(`limits: ${JSON.stringify(o.limits)}`);
  const lines = [
    "apiVersion: v1",
    "kind: Pod",
    `metadata: {name: ${name}}`,
    "spec:",
    "  terminationGracePeriodSeconds: 1",
    ...(o.priority !== undefined ? [`  priority: ${o.priority}`] : []),
    ...(o.priorityClassName ? [`  priorityClassName: ${o.priorityClassName}`] : []),
    ...(o.tolerations ? [`  tolerations: ${o.tolerations}`] : []),
    ...(o.emptyDir !== undefined
      ? [`  volumes: [{name: data, emptyDir: {${o.emptyDir ? `sizeLimit: ${o.emptyDir}` : ""}}}]`]
      : []),
    "  containers:",
    "    - name: main",
    `      image: ${agent.tb.busybox}`,
    `      command: ["sh", "-c", ${JSON.stringify(o.script)}]`,
    ...(resources.length > 0 ? [`      resources: {${resources.join(", ")}}`] : []),
    ...(o.emptyDir !== undefined ? ["      volumeMounts: [{name: data, mountPath: /data}]"] : []),
  ];
  return `${lines.join("\n")}\n`;
}

/** The file a holdMemory script creates once it holds all its memory. */
const HELD_MARKER = "/tmp/held";

/** A script that allocates `mib` MiB of anonymous memory and holds it, creating HELD_MARKER once
 * it does. Busybox awk builds each string slowly, freeing and copying buffers: until then the
 * pod's usage climbs by seconds and swings by a hundred MiB or more. */
export function holdMemory(mib: number): string {
  const chunks = Math.ceil(mib / 256);
  const each = Math.round((mib / chunks) * Mi);
  const strings = Array.from({ length: chunks }, (_, i) => `s${i}=sprintf("%${each}s","")`).join(
    "; ",
  );
  return `exec awk 'BEGIN { ${strings}; system("touch ${HELD_MARKER}; exec sleep 3600") }'`;
}

/** Whether the pod (by manifest name) running a holdMemory script holds all its memory. */
export function holdsAllMemory(agent: TestAgent, name: string): boolean {
  const pod = `${name}-${agent.nodeName}`;
  return agent.cli(["exec", pod, "--", "test", "-e", HELD_MARKER]).code === 0;
}

export async function nodeOf(agent: TestAgent): Promise<Node> {
  const res = await agent.request(`/api/v1/nodes/${agent.nodeName}`);
  return (await res.json()) as Node;
}

/** The status of a node condition ("True"/"False"). */
export async function conditionOf(agent: TestAgent, type: string): Promise<string | undefined> {
  return (await nodeOf(agent)).status.conditions?.find((c) => c.type === type)?.status;
}

export async function eventsOf(agent: TestAgent): Promise<Event[]> {
  const res = await agent.request("/api/v1/events");
  return ((await res.json()) as { items: Event[] }).items;
}

export const isEvicted = (p: Pod): boolean =>
  p.status?.phase === "Failed" && p.status.reason === "Evicted";

/** Evicted, and its container stopped. */
export const isEvictedAndStopped = (p: Pod): boolean =>
  isEvicted(p) && p.status?.containerStatuses?.[0]?.state.terminated !== undefined;

export const isRunning = (p: Pod): boolean =>
  p.status?.phase === "Running" && p.status.containerStatuses?.[0]?.ready === true;

export const containerIdOf = (p: Pod | undefined): string | undefined =>
  p?.status?.containerStatuses?.[0]?.containerID;

/** The flags every eviction test's agent takes: a fast monitoring cycle and node status. */
export function evictionArgs(transition = "2s"): string[] {
  return [
    "--eviction-monitoring-period",
    "500ms",
    "--eviction-pressure-transition-period",
    transition,
    "--node-status-update-frequency",
    "1s",
  ];
}
