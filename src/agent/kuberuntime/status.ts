// The runtime's view of pods, rebuilt from CRI calls and the labels/annotations fleetlet wrote
// (docs/runtime-contract.md): listRunningPods() for PLEG and housekeeping, readPodStatus() for
// one pod (sandboxes newest first, containers newest first, the termination message read from
// the file the container wrote, or from its log under FallbackToLogsOnError).

import { open } from "node:fs/promises";
import type {
  ContainerStatus as CriContainerStatus,
  CriRuntime,
  ContainerState as CriState,
  PodSandboxStatus,
} from "../../cri/index.ts";
import { isNotFound } from "../../cri/index.ts";
import type {
  ContainerState,
  ContainerStatus,
  PodStatus,
  RunningPod,
  SandboxState,
  SandboxStatus,
  SyncChanges,
} from "../kubecontainer/types.ts";
import {
  LABEL_CONTAINER_NAME,
  LABEL_POD_NAME,
  LABEL_POD_NAMESPACE,
  LABEL_POD_UID,
  MANAGED_SELECTOR,
  nodeSelector,
  readContainerAnnotations,
} from "./labels.ts";

/** kubelet's limits on a termination message. */
const MAX_TERMINATION_MESSAGE_BYTES = 4096;
const MAX_FALLBACK_LOG_BYTES = 2048;
const MAX_FALLBACK_LOG_LINES = 80;

const nsToMs = (ns: number): number => (ns > 0 ? Math.floor(ns / 1e6) : 0);

export function toContainerState(s: CriState): ContainerState {
  switch (s) {
    case "CONTAINER_CREATED":
      return "created";
    case "CONTAINER_RUNNING":
      return "running";
    case "CONTAINER_EXITED":
      return "exited";
    default:
      return "unknown";
  }
}

const toSandboxState = (s: PodSandboxStatus["state"]): SandboxState =>
  s === "SANDBOX_READY" ? "ready" : "notready";

/** All pods fleetlet has sandboxes or containers of (those of `nodeName` only, when given),
 * grouped by pod UID. */
export async function listRunningPods(
  cri: CriRuntime,
  timeoutMs?: number,
  nodeName?: string,
): Promise<RunningPod[]> {
  const opts = timeoutMs ? { timeoutMs } : {};
  const labelSelector = nodeName === undefined ? MANAGED_SELECTOR : nodeSelector(nodeName);
  const [sandboxes, containers] = await Promise.all([
    cri.listPodSandbox({ filter: { labelSelector } }, opts),
    cri.listContainers({ filter: { labelSelector } }, opts),
  ]);
  const pods = new Map<string, RunningPod>();
  const get = (labels: Record<string, string>): RunningPod | undefined => {
    const uid = labels[LABEL_POD_UID];
    if (!uid) return undefined;
    let pod = pods.get(uid);
    if (!pod) {
      pod = {
        uid,
        name: labels[LABEL_POD_NAME] ?? "",
        namespace: labels[LABEL_POD_NAMESPACE] ?? "",
        sandboxes: [],
        containers: [],
      };
      pods.set(uid, pod);
    }
    return pod;
  };
  for (const sb of [...sandboxes.items].sort((a, b) => b.createdAt - a.createdAt)) {
    get(sb.labels)?.sandboxes.push({ id: sb.id, state: toSandboxState(sb.state) });
  }
  for (const c of [...containers.containers].sort((a, b) => b.createdAt - a.createdAt)) {
    const name = c.labels[LABEL_CONTAINER_NAME] ?? c.metadata?.name ?? "";
    get(c.labels)?.containers.push({ id: c.id, name, state: toContainerState(c.state) });
  }
  return [...pods.values()];
}

export function toSandboxStatus(s: PodSandboxStatus): SandboxStatus {
  const ips = s.network?.ip ? [s.network.ip, ...s.network.additionalIps.map((a) => a.ip)] : [];
  return {
    id: s.id,
    state: toSandboxState(s.state),
    createdAt: nsToMs(s.createdAt),
    attempt: s.metadata?.attempt ?? 0,
    ips,
    hostNetwork: s.linux?.namespaces?.options?.network === "NODE",
  };
}

function toContainerStatus(s: CriContainerStatus, sandboxId: string): ContainerStatus {
  const info = readContainerAnnotations(s.annotations);
  const out: ContainerStatus = {
    id: s.id,
    name: s.labels[LABEL_CONTAINER_NAME] ?? s.metadata?.name ?? "",
    state: toContainerState(s.state),
    createdAt: nsToMs(s.createdAt),
    startedAt: nsToMs(s.startedAt),
    finishedAt: nsToMs(s.finishedAt),
    exitCode: s.exitCode,
    reason: s.reason,
    message: s.message,
    image: s.image?.userSpecifiedImage || s.image?.image || "",
    imageRef: s.imageRef,
    hash: info.hash,
    restartCount: info.restartCount,
    sandboxId,
  };
  if (info.terminationGracePeriodSeconds !== undefined) {
    out.terminationGracePeriodSeconds = info.terminationGracePeriodSeconds;
  }
  return out;
}

async function readTail(path: string, maxBytes: number): Promise<{ text: string; cut: boolean }> {
  const fh = await open(path, "r");
  try {
    const size = (await fh.stat()).size;
    const length = Math.min(size, maxBytes);
    const buf = Buffer.alloc(length);
    await fh.read(buf, 0, length, size - length);
    return { text: buf.toString("utf8"), cut: size > length };
  } finally {
    await fh.close();
  }
}

async function readHead(path: string, maxBytes: number): Promise<string> {
  const fh = await open(path, "r");
  try {
    const buf = Buffer.alloc(maxBytes);
    const { bytesRead } = await fh.read(buf, 0, maxBytes, 0);
    return buf.subarray(0, bytesRead).toString("utf8");
  } finally {
    await fh.close();
  }
}

/** The messages of CRI-format log lines ("<time> <stream> <P|F> <text>"), the last `maxLines`
 * kept; a first line cut by a tail read is skipped when `cutFirst`. */
export function criLogMessages(text: string, maxLines: number, cutFirst = false): string {
  const lines = text.split("\n");
  let out = "";
  for (const line of cutFirst ? lines.slice(1) : lines) {
    const parts = line.split(" ");
    if (parts.length < 4) continue;
    out += parts.slice(3).join(" ") + (parts[2] === "P" ? "" : "\n");
  }
  const kept = out.endsWith("\n") ? out.slice(0, -1).split("\n") : out.split("\n");
  return kept.slice(-maxLines).join("\n") + (out.endsWith("\n") ? "\n" : "");
}

/** The termination message kubelet reports for an exited container ("" when there is none). */
async function terminationMessage(s: CriContainerStatus): Promise<string> {
  if (s.state !== "CONTAINER_EXITED") return "";
  const info = readContainerAnnotations(s.annotations);
  const mount = s.mounts.find((m) => m.containerPath === info.terminationMessagePath);
  let message = "";
  if (info.terminationMessagePath && mount) {
    message = await readHead(mount.hostPath, MAX_TERMINATION_MESSAGE_BYTES).catch(
      (err: Error) => `Error on reading termination message from logs: ${err.message}`,
    );
  }
  if (
    !message &&
    info.terminationMessagePolicy === "FallbackToLogsOnError" &&
    s.exitCode !== 0 &&
    s.logPath
  ) {
    const tail = await readTail(s.logPath, MAX_FALLBACK_LOG_BYTES).catch(() => ({
      text: "",
      cut: false,
    }));
    message = criLogMessages(tail.text, MAX_FALLBACK_LOG_LINES, tail.cut);
  }
  return message;
}

type ReadOpts = { timeoutMs?: number };

/** One sandbox's status; undefined when the runtime no longer has it. */
async function readSandboxStatus(
  cri: CriRuntime,
  id: string,
  opts: ReadOpts,
): Promise<SandboxStatus | undefined> {
  try {
    const res = await cri.podSandboxStatus({ podSandboxId: id }, opts);
    return res.status ? toSandboxStatus(res.status) : undefined;
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/** One container's status, with its termination message; undefined when it is gone. */
async function readContainerStatus(
  cri: CriRuntime,
  id: string,
  sandboxId: string,
  opts: ReadOpts,
): Promise<ContainerStatus | undefined> {
  try {
    const res = await cri.containerStatus({ containerId: id }, opts);
    if (!res.status) return undefined;
    const status = toContainerStatus(res.status, sandboxId);
    const message = await terminationMessage(res.status);
    if (message) status.message = message;
    return status;
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

const present = <T>(xs: (T | undefined)[]): T[] => xs.filter((x): x is T => x !== undefined);
const byCreatedDesc = (a: { createdAt: number }, b: { createdAt: number }) =>
  b.createdAt - a.createdAt;

function podStatusOf(
  pod: { uid: string; name: string; namespace: string },
  sandboxes: SandboxStatus[],
  containers: ContainerStatus[],
  now: number,
): PodStatus {
  sandboxes.sort(byCreatedDesc);
  containers.sort(byCreatedDesc);
  const latest = sandboxes[0];
  const ips = latest?.state === "ready" ? latest.ips : [];
  return { ...pod, ips, sandboxes, containers, timestamp: now };
}

/** Everything the runtime has of pod `uid`; objects removed while reading are skipped. */
export async function readPodStatus(
  cri: CriRuntime,
  pod: { uid: string; name: string; namespace: string },
  now: number,
  timeoutMs?: number,
): Promise<PodStatus> {
  const opts = timeoutMs ? { timeoutMs } : {};
  const filter = { labelSelector: { [LABEL_POD_UID]: pod.uid } };
  const [sandboxList, containerList] = await Promise.all([
    cri.listPodSandbox({ filter }, opts),
    cri.listContainers({ filter }, opts),
  ]);
  const [sandboxes, containers] = await Promise.all([
    Promise.all(sandboxList.items.map((sb) => readSandboxStatus(cri, sb.id, opts))),
    Promise.all(
      containerList.containers.map((c) => readContainerStatus(cri, c.id, c.podSandboxId, opts)),
    ),
  ]);
  return podStatusOf(pod, present(sandboxes), present(containers), now);
}

/**
 * The pod's status after a sync that planned from `before` and made `changes`, read with the
 * fewest calls: the sandboxes and containers the sync created, and those of `before` that could
 * have changed (ready sandboxes, containers not exited), are read again; stopped ones are taken
 * from `before` (they cannot start again). A sandbox or container
 * that something else made or removed meanwhile shows at the next PLEG relist, as any change
 * the agent did not make itself.
 */
export async function readPodStatusAfter(
  cri: CriRuntime,
  before: PodStatus,
  changes: SyncChanges,
  now: number,
): Promise<PodStatus> {
  const keptSandboxes = before.sandboxes.filter((s) => s.state !== "ready");
  const keptContainers = before.containers.filter((c) => c.state === "exited");
  const rereadSandboxes = [
    ...changes.sandboxes,
    ...before.sandboxes.filter((s) => s.state === "ready").map((s) => s.id),
  ];
  const rereadContainers = [
    ...changes.containers,
    ...before.containers
      .filter((c) => c.state !== "exited")
      .map((c) => ({ id: c.id, sandboxId: c.sandboxId })),
  ];
  const [sandboxes, containers] = await Promise.all([
    Promise.all([...new Set(rereadSandboxes)].map((id) => readSandboxStatus(cri, id, {}))),
    Promise.all(rereadContainers.map((c) => readContainerStatus(cri, c.id, c.sandboxId, {}))),
  ]);
  const { uid, name, namespace } = before;
  return podStatusOf(
    { uid, name, namespace },
    [...keptSandboxes, ...present(sandboxes)],
    [...keptContainers, ...present(containers)],
    now,
  );
}
