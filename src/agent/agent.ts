// `fleetlet agent`: wires the managers together and runs them until stopped. Stopping the agent
// never stops pods: containers keep running under containerd, and a restarted agent recovers
// them from the runtime's labels without restarting anything.

import { readFileSync } from "node:fs";
import { networkInterfaces } from "node:os";
import type { Pod } from "../api/types.ts";
import { type CriClient, createCriClient } from "../cri/index.ts";
import { type Clock, realClock } from "../util/clock.ts";
import type { Logger } from "../util/log.ts";
import { buildInfo } from "../util/version.ts";
import { setupContainerManager, toResourceList } from "./cm/index.ts";
import type { AgentConfig } from "./config/index.ts";
import { createEventRecorder, manifestRef, podRef } from "./events/index.ts";
import {
  createAgentEviction,
  createPodEvictor,
  createPsiReader,
  type EvictionManager,
  formatPsi,
} from "./eviction/index.ts";
import { createAgentGC, type PodGCState } from "./gc/index.ts";
import { hubDesiredState } from "./hub-desired.ts";
import type { createAgentHub } from "./hubclient/index.ts";
import { computePodActions, planSteps } from "./kuberuntime/index.ts";
import { runMemoryTrim } from "./memory.ts";
import { createAgentNodeStatus } from "./nodestatus/index.ts";
import { createListingCache, createPLEG, createRuntimeEventWatch } from "./pleg/index.ts";
import { createPodSync } from "./pod-sync.ts";
import { createPodWorkers } from "./podworkers/index.ts";
import { createPolicyAdmission } from "./policy/index.ts";
import { createAgentProber } from "./prober/agent-prober.ts";
import { createAgentRuntime } from "./runtime.ts";
import { createRuntimeHealth } from "./runtime-health.ts";
import { startAgentServer } from "./server/index.ts";
import { createServerDeps } from "./server-deps.ts";
import { createFileSource, createObjectStore, createPodConfig } from "./sources/index.ts";
import { createStatusManager } from "./status/index.ts";
import { lazyStreamOpener } from "./streams/lazy.ts";
import { createSyncLoop } from "./syncloop/index.ts";
import { createSysctlAdmission, KERNEL_RELEASE_FILE } from "./sysctl/index.ts";
import { createSystemMounter, createVolumeManager } from "./volumes/index.ts";

export interface AgentDeps {
  clock?: Clock;
  logger: Logger;
}

/** The first non-internal IPv4 address of the host (status.hostIP), else 127.0.0.1. */
export function detectHostIP(): string {
  for (const addrs of Object.values(networkInterfaces())) {
    for (const a of addrs ?? []) if (a.family === "IPv4" && !a.internal) return a.address;
  }
  return "127.0.0.1";
}

export async function runAgent(
  config: AgentConfig,
  deps: AgentDeps,
  signal: AbortSignal,
): Promise<void> {
  const clock = deps.clock ?? realClock;
  const log = deps.logger;
  const hostIP = detectHostIP();
  const info = buildInfo();
  log.info("starting fleetlet agent", {
    version: info.version,
    commit: info.commit,
    node: config.nodeName,
    manifests: config.staticPodPath,
    runtime: config.containerRuntimeEndpoint,
  });

  const criLog = log.with({ component: "cri" });
  const cri: CriClient = createCriClient({
    endpoint: config.containerRuntimeEndpoint,
    lifecycleTimeoutMs: config.runtimeRequestTimeout,
    // Every CRI call and its duration at logLevel debug: where a slow device spends its time.
    ...(config.logLevel === "debug" && {
      onCall: (method, ms, error) =>
        criLog.debug("CRI call", {
          method,
          ms: Math.round(ms * 10) / 10,
          ...(error && { error: error.message }),
        }),
    }),
  });
  const recorder = createEventRecorder({ clock, nodeName: config.nodeName, log });
  // Detects the cgroup version, creates kubepods and the QoS cgroups, restores the CPU manager.
  const cm = await setupContainerManager(config, {
    logger: log,
    cpusets: {
      runningPods: () => listing.recent(),
      updateCpuset: async (containerId, cpusetCpus) => {
        await cri.updateContainerResources({ containerId, linux: { cpusetCpus } });
      },
    },
  });
  // The ConfigMaps and Secrets of the sources, and the volumes made of them.
  const objects = createObjectStore({
    sources: config.hub === undefined ? ["file"] : ["file", "api"],
    onError: (c) => {
      log.warn("object refused", { source: c.source, reason: c.message });
      const { kind, namespace, name } = c;
      recorder.event({ kind, namespace, name }, "Warning", "Refused", c.message);
    },
  });
  const allocatable = () => cm.allocatable();
  const volumes = createVolumeManager({
    rootDir: config.rootDir,
    nodeName: config.nodeName,
    objects,
    allocatable,
    clock,
    logger: log.with({ component: "volumes" }),
    recorder: (pod, type, reason, message) => recorder.event(podRef(pod), type, reason, message),
    mounter: createSystemMounter(),
  });
  const runtime = createAgentRuntime({
    ...{ cri, clock, logger: log, recorder, config, hostIP, cm },
    ...{ volumes, objects, allocatable },
  });
  const statusManager = createStatusManager({ clock, logger: log });
  // Housekeeping takes PLEG's last listing rather than listing every pod again.
  const listing = createListingCache(() => runtime.getPods(), clock, config.plegRelistPeriod * 2);
  const pleg = createPLEG({
    clock,
    logger: log.with({ component: "pleg" }),
    relistPeriodMs: config.plegRelistPeriod,
    eventedRelistPeriodMs: config.plegEventedRelistPeriod || config.plegRelistPeriod,
    listPods: () => listing.fresh(),
    getPodStatus: (uid, name, ns) => runtime.getPodStatus(uid, name, ns),
    // A pod a sync is acting on gets its status read by that sync; the relist after it takes it.
    readPending: (uid) => podSync.readPending(uid),
    settledBySync: (uid, status) => podSync.settled(uid, status),
  });
  // Container exits seen at once: the runtime's events make the PLEG relist (0: relist only).
  const runtimeEvents =
    config.plegEventedRelistPeriod > 0
      ? createRuntimeEventWatch({
          clock,
          logger: log.with({ component: "pleg" }),
          subscribe: (handler, s) => cri.containerEvents(handler, s),
          onEvent: (event) => pleg.notify(event),
          onFlowing: (flowing) => pleg.setEventsFlowing(flowing),
        })
      : undefined;
  const health = createRuntimeHealth({
    cri,
    clock,
    logger: log,
    plegHealthy: () => pleg.healthy(),
  });
  const gc = createAgentGC({
    config,
    cri,
    clock,
    logger: log,
    runtime,
    recorder,
    sourcesReady: () => podConfig.seenAllSources(),
    podState: (uid): PodGCState => {
      // An evicted pod's content goes although its manifest is still there (the kubelet's
      // ShouldPodContentBeRemoved): its dead containers are collected as a gone pod's.
      if (workers.isEvicted(uid) && workers.state(uid) === "terminated") return "gone";
      if (loop?.pods().has(uid)) return workers.state(uid) === "terminated" ? "finished" : "active";
      return workers.couldHaveRunningContainers(uid) ? "active" : "gone";
    },
  });
  const psiLog = log.with({ component: "psi" });
  const readPsi = createPsiReader((resource, error) =>
    error === undefined
      ? psiLog.info("node pressure stall information readable again", { resource })
      : psiLog.warn("cannot read the node's pressure stall information", { resource, error }),
  );
  let eviction: EvictionManager | undefined;
  const nodeStatus = await createAgentNodeStatus({
    config,
    hostIP,
    version: info.version,
    cri,
    health,
    clock,
    logger: log.with({ component: "nodestatus" }),
    allocatable: () => toResourceList(cm.allocatable()),
    images: () => gc.images.imageList(),
    pressure: () => {
      const c = eviction?.conditions() ?? [];
      return {
        memory: c.includes("MemoryPressure"),
        disk: c.includes("DiskPressure"),
        pid: c.includes("PIDPressure"),
      };
    },
    psi: () =>
      Object.fromEntries(Object.entries(readPsi()).map(([r, line]) => [r, formatPsi(line)])),
  });
  let hub: ReturnType<typeof createAgentHub>;
  const podConfig = createPodConfig({
    // The manifest folder first: its pods win a name from the hub's.
    sources: config.hub === undefined ? ["file"] : ["file", "api"],
    clock,
    onError: (c) => {
      log.warn("pod refused", { pod: c.pod, source: c.source, reason: c.message });
      const [namespace = "default", name = c.pod] = c.pod.split("/");
      recorder.event({ kind: "Pod", namespace, name }, "Warning", "Refused", c.message);
    },
    onConflictsChanged: (source) => {
      if (source === "api") hub?.desiredChanged();
    },
  });
  const desired =
    config.hub === undefined ? undefined : hubDesiredState(config, podConfig, objects, log);
  const policy = createPolicyAdmission(config.hubPodPolicy);
  const sysctls = createSysctlAdmission({
    allowedUnsafeSysctls: config.allowedUnsafeSysctls,
    kernelRelease: () => readFileSync(KERNEL_RELEASE_FILE, "utf8"),
    log: log.with({ component: "sysctl" }),
  });
  let loop: ReturnType<typeof createSyncLoop> | undefined;
  const prober = createAgentProber({
    clock,
    logger: log.with({ component: "prober" }),
    cri,
    recorder,
    statusManager,
    pod: (uid) => loop?.pods().get(uid),
    isTerminating: (uid) => workers.isTerminationRequested(uid),
    sync: (pod) => workers.updatePod({ pod, type: "sync" }),
  });
  const podSync = createPodSync({
    runtime,
    statusManager,
    clock,
    logger: log,
    rootDir: config.rootDir,
    hostIP: () => hostIP,
    updateCache: (uid, status) => pleg.updateCache(uid, status),
    isDesired: (uid) => loop?.pods().has(uid) ?? false,
    cachedStatus: (uid) => pleg.cache.get(uid),
    hasActions: (pod, status, opts) => planSteps(computePodActions(pod, status, opts)).length > 0,
    prepareInTurn: runtime.prepareInTurn,
    volumes,
    podCgroups: {
      ensure: (pod) => cm.ensurePodCgroup(pod),
      remove: (uid) => cm.removePodCgroup(uid),
    },
    livenessFailed: (uid) => prober.failed("liveness", uid),
    startupFailed: (uid) => prober.failed("startup", uid),
    readiness: prober.readiness,
    startup: prober.startup,
  });
  const workers = createPodWorkers({
    ...podSync,
    clock,
    logger: log.with({ component: "podworkers" }),
    requeue: (uid, ms) => loop?.requeue(uid, ms),
    resyncIntervalMs: config.syncFrequency,
    // As the kubelet's pod worker back-off, which equals its crash-loop and pull back-off base.
    errorBackoffMs: Math.min(config.crashLoopBackOffBase, config.imagePullBackOffBase),
    signal,
  });
  eviction = createAgentEviction({
    config,
    cri,
    clock,
    logger: log.with({ component: "eviction" }),
    podCgroupName: (pod) => cm.podCgroupParent(pod),
    activePods: () => workers.activePods(),
    evictPod: createPodEvictor({
      warn: (pod, reason, message) => recorder.event(podRef(pod), "Warning", reason, message),
      updatePod: (update) => workers.updatePod(update),
    }),
    podCleanedUp: (uid) => !workers.couldHaveRunningContainers(uid),
    emptyDirLimits: (pod) => volumes.diskEmptyDirLimits(pod),
    nodeEvent: (type, reason, message) =>
      recorder.event({ kind: "Node", namespace: "", name: config.nodeName }, type, reason, message),
    onConditions: () => void nodeStatus.update(),
    // Disk pressure first frees what the node can (the kubelet's node-level reclaim).
    reclaim: {
      containers: () => gc.reclaim.deleteAllUnusedContainers(),
      images: () => gc.reclaim.deleteUnusedImages(),
    },
  });
  const evictionManager = eviction;
  const runsAlready = (pod: Pod) =>
    pleg.cache.get(pod.metadata.uid ?? "")?.status?.containers.some((c) => c.state === "running") ??
    false;
  loop = createSyncLoop({
    clock,
    logger: log,
    nextConfigUpdate: (s) => podConfig.updates.next(s),
    nextPLEGEvent: (s) => pleg.next(s),
    seenAllSources: () => podConfig.seenAllSources(),
    runtimeHealthy: () => health.healthy(),
    updatePod: (update) => workers.updatePod(update),
    workerState: (uid) => workers.state(uid),
    couldHaveRunningContainers: (uid) => workers.couldHaveRunningContainers(uid),
    syncKnownPods: (desired) => workers.syncKnownPods(desired),
    forgetWorker: (uid) => workers.forgetTerminated(uid),
    rejectPod: (pod, reason, message) => podSync.reject(pod, reason, message),
    event: (pod, type, reason, message) => recorder.event(podRef(pod), type, reason, message),
    statusUids: () => statusManager.uids(),
    removeStatus: (uid) => statusManager.removePod(uid),
    forgetCache: (uid) => pleg.cache.delete(uid),
    runtimePods: () => listing.recent(),
    removeOrphan: async (rp) => {
      await runtime.killPod(undefined, rp);
      await runtime.removePod(rp);
    },
    rootDir: config.rootDir,
    podLogsDir: config.podLogsDir,
    maxPods: config.maxPods,
    admitHandlers: {
      // Node pressure keeps new pods out, but does not stop a pod whose containers already run
      // (admitted before the agent restarted): the eviction manager ranks it with the others.
      // Then the sysctls, which the runtime would set in the pod's namespaces.
      beforeCount: [
        (pod) => (runsAlready(pod) ? undefined : evictionManager.admit(pod)),
        (pod) => sysctls.admit(pod),
      ],
      // Hub pods must keep to the device's policy before they may take resources.
      afterCount: [
        (pod, active) => policy.admit(pod, active),
        (pod, active) => cm.admit(pod, active),
      ],
    },
    cgroupHousekeeping: (active, keep) => cm.housekeeping(active, keep),
    readmissions: {
      due: () => evictionManager.readmissionsDue(),
      forget: (uid) => evictionManager.forgetReadmission(uid),
    },
    housekeepingIntervalMs: config.housekeepingInterval,
    removePodDir: (uid) => volumes.removePod(uid),
  });
  objects.subscribe((keys) => loop?.handleObjectsChanged(keys));
  const fileSource = createFileSource({
    path: config.staticPodPath,
    nodeName: config.nodeName,
    checkFrequencyMs: config.fileCheckFrequency,
    clock,
    log: log.with({ component: "manifests" }),
    onSnapshot: (pods: Pod[]) => podConfig.set("file", pods),
    onObjects: (list) => objects.set("file", list),
    // The file source logs the warning itself.
    onError: (p) => recorder.event(manifestRef(p.path), "Warning", "InvalidManifest", p.message),
  });

  const serverDeps = createServerDeps({
    config,
    loop,
    statusManager,
    recorder,
    cri,
    health,
    relistStats: () => pleg.relistStats(),
    probeStats: () => prober.stats(),
    node: () => nodeStatus.node(),
    eviction: { manager: evictionManager, psi: readPsi },
  });
  const streams = lazyStreamOpener({
    pod: serverDeps.getPod,
    logPath: serverDeps.logPath,
    cri,
    log: log.with({ component: "streams" }),
    clock,
  });
  const server = await startAgentServer(serverDeps, {
    socketPath: config.apiSocket,
    log,
    clock,
    streams,
  });

  // One relist before the first health check, so a healthy runtime is never reported down.
  await pleg.relist();
  await health.check();
  // Loaded only when a hub is configured: an agent on its own never needs the hub client.
  hub =
    config.hub &&
    (await import("./hubclient/index.ts")).createAgentHub({
      config,
      version: info.version,
      clock,
      logger: log,
      nodeStatus,
      statusManager,
      recorder,
      pods: () => loop.pods(),
      podsSynced: () => podConfig.seenAllSources(),
      ...(desired !== undefined && { desired }),
      streams,
    });
  await Promise.all([
    nodeStatus.run(signal),
    hub?.run(signal),
    health.run(signal),
    pleg.run(signal),
    runtimeEvents?.run(signal),
    fileSource.run(signal),
    loop.run(signal),
    evictionManager.run(signal),
    prober.run(signal),
    gc.run(signal),
    runMemoryTrim(clock, signal),
  ]);
  log.info("stopping: pods keep running");
  await server.stop();
  cri.close();
}
