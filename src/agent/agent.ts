// `fleetlet agent`: the composition root. runAgent creates the managers in start order, each
// through its folder's setup, so that every manager is created after those it reads; the three
// cycles of the kubelet's design (pod sync reads the prober, which asks the pod workers for
// syncs; the eviction manager tells the node status it reads; the pod config tells the hub client
// created last) go through explicit ports. Stopping the agent never stops pods: containers keep
// running under containerd, and a restarted agent recovers them from the runtime's labels.

import { networkInterfaces } from "node:os";
import type { Pod } from "../api/types.ts";
import type { CriRuntime } from "../cri/index.ts";
import { type Clock, realClock } from "../util/clock.ts";
import type { Logger } from "../util/log.ts";
import { buildInfo } from "../util/version.ts";
import { registerDeviceMetrics } from "./cm/devicemanager/metrics.ts";
import {
  ActivePodsPort,
  countsAsQuantities,
  setupDeviceManager,
  withDeviceHousekeeping,
} from "./cm/devicemanager/setup.ts";
import { setupContainerManager, toResourceList } from "./cm/index.ts";
import type { AgentConfig } from "./config/index.ts";
import { createEventRecorder, type EventRecorder } from "./events/index.ts";
import { createStateWrites, type StateWrites } from "./events/state-writes.ts";
import { registerEvictionMetrics } from "./eviction/metrics.ts";
import { createLoggedPsiReader, formatNodePsi, setupEviction } from "./eviction/setup.ts";
import { createAgentGC, podGCState } from "./gc/setup.ts";
import { collectHealth, hostCollectorDeps } from "./health/collect.ts";
import { registerHealthMetrics } from "./health/metrics.ts";
import { HealthReporter } from "./health/reporter.ts";
import { HubPort, hubDesiredState } from "./hubclient/desired-source.ts";
import type { AgentHubWiring } from "./hubclient/index.ts";
import { setupImageImport } from "./images/import/setup.ts";
import { imageFsMountpoint } from "./images/index.ts";
import type { RunningPod } from "./kubecontainer/types.ts";
import { checkCgroupDriver } from "./kuberuntime/cgroup-driver.ts";
import { createRuntimeHealth } from "./kuberuntime/health.ts";
import {
  connectContainerd,
  connectRuntime,
  createAgentRuntime,
  createRuntimeListing,
} from "./kuberuntime/setup.ts";
import { createAdmitHandlers } from "./lifecycle/index.ts";
import { runMemoryTrim } from "./memory/index.ts";
import { createAgentNodeStatus, NodeStatusPort, pressureOf } from "./nodestatus/setup.ts";
import { createPodCache, type ListingCache, type PodCache } from "./pleg/index.ts";
import { setupPLEG } from "./pleg/setup.ts";
import { createPodManager } from "./podmanager/index.ts";
import { setupPodSync } from "./podsync/setup.ts";
import { PodWorkersPort, setupPodWorkers } from "./podworkers/setup.ts";
import { createAgentProber } from "./prober/agent-prober.ts";
import { registerProbeMetrics } from "./prober/metrics.ts";
import { startLocalApi } from "./server/setup.ts";
import { setupFileSource, setupObjectStore, setupPodConfig } from "./sources/setup.ts";
import { createStatusManager } from "./status/index.ts";
import { lazyStreamOpener } from "./streams/lazy.ts";
import { createWorkQueue } from "./syncloop/index.ts";
import { setupSyncLoop } from "./syncloop/setup.ts";
import { setupAgentUpdates } from "./update/setup.ts";
import { setupVolumeManager } from "./volumes/setup.ts";

export interface AgentDeps {
  clock?: Clock;
  logger: Logger;
  /** Stops the agent so that its launcher starts an installed update (absent: logged only). */
  restart?: () => void;
}

/** The first non-internal IPv4 address of the host (status.hostIP), else 127.0.0.1. */
function detectHostIP(): string {
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
  const { clock = realClock, logger: log } = deps;
  const [hostIP, version] = [detectHostIP(), logStart(config, log)];
  const recorder = createEventRecorder({ clock, nodeName: config.nodeName, log });
  const stateWrites = createStateWrites({
    clock,
    logger: log,
    recorder,
    nodeName: config.nodeName,
  });
  const base: Base = { config, clock, logger: log, recorder, stateWrites, hostIP, version };
  const rt = await runtimeManagers(base);
  const pm = podManagers(base, rt, signal);
  const nm = await nodeManagers(base, rt, pm);
  const { cm, listing, objects, volumes, runtime, cri, devices } = rt;
  const { pods, podCache, pleg, health, statusManager } = pm;
  const { eviction, nodeStatus } = nm;
  const admitHandlers = createAdmitHandlers({
    ...base,
    eviction,
    resources: cm,
    devices,
    runsAlready: runsAlready(podCache),
  });
  const loop = setupSyncLoop({
    ...{ ...base, ...pm, objects, admitHandlers, runtime, eviction, volumes },
    cm: withDeviceHousekeeping(cm, devices),
    runtimePods: () => listing.recent(),
  });
  const fileSource = setupFileSource(base, pm.podConfig, objects);
  const deviceHealth = deviceHealthReporter(base, cri);
  const { server, streams } = await localApi(base, rt, pm, nm, deviceHealth);
  // One relist before the first health check, so a healthy runtime is never reported down.
  await pleg.relist();
  await health.check();
  await nm.imports.scan(signal); // the import folder's images before the first pod starts
  const updates = await agentUpdates(base, pm, deps.restart);
  const hub = await startHub(config, {
    ...{ health: deviceHealth, updates: updates.manager, pods: () => pods.pods() },
    ...{ version, clock, logger: log, nodeStatus, statusManager, recorder, streams, stateWrites },
    podsSynced: () => pm.podConfig.seenAllSources(),
    ...(pm.desired && { desired: pm.desired }),
  });
  pm.hubPort.bind(hub);
  await Promise.all([
    ...[nodeStatus.run(signal), hub?.run(signal), health.run(signal), pleg.run(signal)],
    ...[pm.runtimeEvents?.run(signal), fileSource.run(signal), loop.run(signal)],
    ...[eviction.run(signal), pm.prober.run(signal), nm.gc.run(signal), devices.run(signal)],
    ...[runMemoryTrim(clock, signal), nm.imports.run(signal)],
    ...[deviceHealth.run(signal), updates.run(signal)],
  ]);
  log.info("stopping: pods keep running");
  await server.stop();
  for (const part of [cri, rt.containerd, rt.cm]) part.close();
}

/** What every manager's setup may take. */
interface Base {
  config: AgentConfig;
  clock: Clock;
  logger: Logger;
  recorder: EventRecorder;
  /** Where every failed write of a state file is said (a node event, at a bounded rate). */
  stateWrites: StateWrites;
  /** status.hostIP of every pod. */
  hostIP: string;
  /** The agent's version. */
  version: string;
}

/** The runtime side: CRI, the runtime's pod listing, the container manager (cgroups, CPU
 * manager), the sources' objects, the volumes, and the runtime manager. */
async function runtimeManagers(base: Base) {
  const { config, clock, logger, stateWrites } = base;
  const cri = connectRuntime(config, logger);
  // A runtime making cgroups the other way would fail every container start: refused here.
  await checkCgroupDriver(config, cri, logger.with({ component: "cri" }));
  const containerd = connectContainerd(config);
  // PLEG relists it; housekeeping and the CPU manager take its last listing.
  const listing = createRuntimeListing(cri, config, clock);
  // Detects the cgroup version, creates kubepods and the QoS cgroups, restores the CPU manager.
  const cm = await setupContainerManager(config, {
    ...{ logger, stateWrites },
    cpusets: cpusets(cri, listing),
  });
  const objects = setupObjectStore(base);
  const allocatable = () => cm.allocatable();
  const volumes = setupVolumeManager({ ...base, objects, allocatable });
  // Plugins, host device groups and the checkpoint; the active pods come once the workers exist.
  const activePods = new ActivePodsPort();
  const devices = setupDeviceManager(base, activePods);
  const runtime = createAgentRuntime({
    ...{ ...base, cri, containerd, cm, volumes, objects, allocatable, devices },
  });
  return { cri, containerd, listing, cm, objects, volumes, runtime, devices, activePods };
}

/** The pod side, from the sources to the runtime: the pod config and the pod manager, the
 * prober, pod sync, PLEG and the runtime's health, and the pod workers. */
function podManagers(
  base: Base,
  rt: Awaited<ReturnType<typeof runtimeManagers>>,
  signal: AbortSignal,
) {
  const { config, clock, logger: log } = base;
  const { cri, runtime } = rt;
  const statusManager = createStatusManager({ clock, logger: log });
  const [pods, podCache, workQueue] = [
    createPodManager(),
    createPodCache(),
    createWorkQueue(clock),
  ];
  const [hubPort, workersPort] = [new HubPort(), new PodWorkersPort()];
  const podConfig = setupPodConfig(base, () => hubPort.desiredChanged());
  const desired =
    config.hub && hubDesiredState(config, podConfig, rt.objects, log, base.stateWrites);
  const prober = createAgentProber({
    ...{ ...base, logger: log.with({ component: "prober" }), cri, statusManager },
    pod: (uid) => pods.pod(uid),
    isTerminating: (uid) => workersPort.isTerminationRequested(uid),
    sync: (pod) => workersPort.updatePod({ pod, type: "sync" }),
  });
  const podSync = setupPodSync({ ...base, ...rt, statusManager, podCache, pods, prober });
  // A device appearing or a plugin registering lets the pods waiting for devices go on at once.
  rt.devices.onChange(() => {
    for (const uid of podSync.waitingForDevices()) {
      const pod = pods.pod(uid);
      if (pod !== undefined) workersPort.updatePod({ pod, type: "sync" });
    }
  });
  const { pleg, runtimeEvents } = setupPLEG({
    ...{ ...base, cri, listing: rt.listing, podCache, podSync },
    getPodStatus: (uid, name, ns) => runtime.getPodStatus(uid, name, ns),
  });
  const health = createRuntimeHealth({
    cri,
    clock,
    logger: log,
    plegHealthy: () => pleg.healthy(),
  });
  const workers = setupPodWorkers({
    ...{ ...base, podSync, signal, port: workersPort },
    requeue: (uid, ms) => workQueue.enqueue(uid, ms),
  });
  rt.activePods.bind({
    activePods: () =>
      [...pods.pods().values()].filter((p) => workers.state(p.metadata.uid ?? "") !== "terminated"),
    sourcesReady: () => podConfig.seenAllSources(),
  });
  return {
    ...{ statusManager, pods, podCache, workQueue, hubPort, podConfig, desired, prober },
    ...{ podSync, pleg, runtimeEvents, health, workers },
  };
}

/** The node side: the garbage collectors, the eviction manager, the node status. */
async function nodeManagers(
  base: Base,
  rt: Awaited<ReturnType<typeof runtimeManagers>>,
  pm: ReturnType<typeof podManagers>,
) {
  const { logger: log } = base;
  const { cri, cm } = rt;
  const { workers, pods } = pm;
  const sourcesReady = () => pm.podConfig.seenAllSources();
  const imports = setupImageImport({ ...base, nodeEvent: nodeEventOf(base) });
  const gc = createAgentGC({
    ...{ ...base, ...rt, sourcesReady, podState: podGCState(workers, pods) },
    pinnedImages: () => imports.pinned(),
  });
  const readPsi = createLoggedPsiReader(log);
  const nodeStatusPort = new NodeStatusPort();
  const eviction = setupEviction({
    ...{ ...base, cri, cm, workers, volumes: rt.volumes, reclaim: gc.reclaim },
    onConditions: () => nodeStatusPort.update(),
  });
  const nodeStatus = await createAgentNodeStatus({
    ...{ ...base, cri, health: pm.health, logger: log.with({ component: "nodestatus" }) },
    allocatable: () => toResourceList(cm.allocatable()),
    devices: () => ({
      capacity: countsAsQuantities(rt.devices.capacity()),
      allocatable: countsAsQuantities(rt.devices.allocatable()),
    }),
    images: () => gc.images.imageList(),
    pressure: pressureOf(() => eviction.conditions()),
    psi: () => formatNodePsi(readPsi()),
  });
  nodeStatusPort.bind(nodeStatus);
  rt.devices.onChange(() => nodeStatusPort.update());
  return { gc, imports, readPsi, eviction, nodeStatus };
}

/** Records an event about the node. */
function nodeEventOf(base: Base) {
  const { nodeName } = base.config;
  return (type: "Normal" | "Warning", reason: string, message: string) =>
    base.recorder.event(
      { kind: "Node", namespace: "", name: nodeName, uid: nodeName },
      type,
      reason,
      message,
    );
}

/** The agent's part in its own updates: the hub's offers taken, a rollback reported, and the
 * trial's health told to the launcher (docs/agent-updates.md). */
function agentUpdates(base: Base, pm: ReturnType<typeof podManagers>, restart?: () => void) {
  const { config, clock, logger, version } = base;
  return setupAgentUpdates({
    ...{ config, clock, logger, version, env: process.env },
    nodeEvent: nodeEventOf(base),
    runtimeHealthy: () => pm.health.healthy(),
    podsSynced: () => pm.podConfig.seenAllSources(),
    hubConnected: config.hub && (() => pm.hubPort.connected()),
    restart: restart ?? (() => logger.warn("an update was installed; restart the agent to run it")),
  });
}

/** The local API on its socket, and the stream opener it shares with the hub client. */
function localApi(
  base: Base,
  rt: Awaited<ReturnType<typeof runtimeManagers>>,
  pm: ReturnType<typeof podManagers>,
  nm: Awaited<ReturnType<typeof nodeManagers>>,
  deviceHealth: HealthReporter,
) {
  const { config, clock, logger: log, recorder } = base;
  const { cri } = rt;
  const { prober, pleg, workers } = pm;
  return startLocalApi(
    {
      ...{ podLogsDir: config.podLogsDir, pods: pm.pods, statusManager: pm.statusManager },
      ...{ recorder, cri, health: pm.health, node: () => nm.nodeStatus.node() },
      stillStopping: (uid) => workers.couldHaveRunningContainers(uid),
      relistStats: () => pleg.relistStats(),
      metrics: [
        (m) => registerProbeMetrics(m, () => prober.stats()),
        (m) => registerEvictionMetrics(m, nm.eviction, nm.readPsi),
        (m) => registerDeviceMetrics(m, () => rt.devices.stats()),
        (m) => registerHealthMetrics(m, () => deviceHealth.latest),
      ],
    },
    {
      ...{ socketPath: config.apiSocket, log, clock },
      streams: (api) =>
        lazyStreamOpener({
          ...{ pod: api.getPod, logPath: api.logPath, cri, clock },
          log: log.with({ component: "streams" }),
        }),
    },
  );
}

/** The device's health, read from /proc and /sys every deviceHealthPeriod (health/): the root
 * dir's filesystem always, and the image filesystem once the runtime has named it. */
function deviceHealthReporter(base: Base, cri: Pick<CriRuntime, "imageFsInfo">): HealthReporter {
  const { config, clock, logger } = base;
  const paths = [config.rootDir];
  const deps = hostCollectorDeps(paths);
  imageFsMountpoint(cri).then(
    (path) => paths.push(path),
    (err: unknown) =>
      logger.warn("device health leaves out the image filesystem", {
        component: "health",
        error: (err as Error).message,
      }),
  );
  return new HealthReporter({
    clock,
    logger: logger.with({ component: "health" }),
    collect: (now) => collectHealth(deps, now),
    periodMs: config.deviceHealthPeriod,
    countersPeriodMs: config.deviceHealthCountersPeriod,
  });
}

/** Logs what starts; returns the agent's version. */
function logStart(config: AgentConfig, log: Logger): string {
  const info = buildInfo();
  log.info("starting fleetlet agent", {
    version: info.version,
    commit: info.commit,
    node: config.nodeName,
    manifests: config.staticPodPath,
    runtime: config.containerRuntimeEndpoint,
  });
  return info.version;
}

/** The CPU manager's reach into the runtime: its pods (PLEG's listing) and the cpuset update. */
function cpusets(cri: CriRuntime, listing: ListingCache<RunningPod>) {
  return {
    runningPods: () => listing.recent(),
    updateCpuset: async (containerId: string, cpusetCpus: string) => {
      await cri.updateContainerResources({ containerId, linux: { cpusetCpus } });
    },
  };
}

/** Whether some container of the pod runs, by the pod cache. */
function runsAlready(cache: PodCache): (pod: Pod) => boolean {
  return (pod) =>
    cache.get(pod.metadata.uid ?? "")?.status?.containers.some((c) => c.state === "running") ??
    false;
}

/** The hub client, loaded only when a hub is configured: an agent on its own never needs it. */
async function startHub(config: AgentConfig, wiring: Omit<AgentHubWiring, "config">) {
  if (config.hub === undefined) return undefined;
  return (await import("./hubclient/index.ts")).createAgentHub({ config, ...wiring });
}
