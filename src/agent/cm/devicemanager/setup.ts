// Creates the agent's device manager: the manager (checkpoint, allocation), a built-in endpoint per
// host device group, and, while it runs, the Registration service on kubelet.sock, each accepted
// plugin connected and added. The active pods come through a port, bound once the pod workers
// exist (the manager is created before them: the runtime manager reads it).

import type { Pod } from "../../../api/types.ts";
import type { Clock } from "../../../util/clock.ts";
import type { Logger } from "../../../util/log.ts";
import type { AgentConfig } from "../../config/index.ts";
import { type EventRecorder, podRef } from "../../events/index.ts";
import type { StateWrites } from "../../events/state-writes.ts";
import { KUBELET_SOCKET } from "./api.ts";
import { connectDevicePlugin } from "./endpoint.ts";
import { createHostDeviceGroup } from "./host-devices.ts";
import type { DeviceManager } from "./index.ts";
import { DeviceManagerCore } from "./manager.ts";
import { removeStaleSockets, startRegistrationServer } from "./registration.ts";

export interface AgentDeviceManagerInput {
  config: Pick<
    AgentConfig,
    "devicePluginPath" | "devicePluginWaitTimeout" | "devicePluginCallTimeout" | "hostDevices"
  >;
  clock: Clock;
  logger: Logger;
  recorder: Pick<EventRecorder, "event">;
  stateWrites?: StateWrites;
}

/** The pods that hold or may hold devices, and whether every pod source was seen once (until
 * then no pod's devices are freed: a pod not seen yet may be running). Bound by the composition
 * root once the pod workers exist. */
export class ActivePodsPort {
  private source: { activePods(): Pod[]; sourcesReady(): boolean } | undefined;

  bind(source: { activePods(): Pod[]; sourcesReady(): boolean }): void {
    this.source = source;
  }

  activePods(): Pod[] {
    return this.source?.activePods() ?? [];
  }

  sourcesReady(): boolean {
    return this.source?.sourcesReady() ?? false;
  }
}

/** The device manager, its host device groups served; run() serves kubelet.sock. */
export function setupDeviceManager(
  input: AgentDeviceManagerInput,
  active: ActivePodsPort,
): DeviceManager {
  const { config, clock } = input;
  const logger = input.logger.with({ component: "devicemanager" });
  // As the kubelet at start: plugins' sockets left from before go (the plugins see kubelet.sock
  // made anew and register again); the checkpoint stays.
  removeStaleSockets(config.devicePluginPath, logger);
  const core = DeviceManagerCore.open({
    clock,
    logger,
    checkpointDir: config.devicePluginPath,
    waitTimeoutMs: config.devicePluginWaitTimeout,
    knownResources: config.hostDevices.map((g) => g.name),
    event: (pod, type, reason, message) => input.recorder.event(podRef(pod), type, reason, message),
    activePods: () => active.activePods(),
    sourcesReady: () => active.sourcesReady(),
    ...(input.stateWrites !== undefined && { stateWrites: input.stateWrites }),
  });
  for (const group of config.hostDevices)
    core.addEndpoint(createHostDeviceGroup(group, { clock, log: logger }));
  return new ServedDeviceManager(core, input, logger);
}

/** The manager, with run() serving the Registration service until the agent stops. */
class ServedDeviceManager implements DeviceManager {
  readonly admit: DeviceManager["admit"];
  readonly prepare: DeviceManager["prepare"];
  readonly containerOptions: DeviceManager["containerOptions"];
  readonly containerDevices: DeviceManager["containerDevices"];
  readonly resourceStatus: DeviceManager["resourceStatus"];
  readonly removeStale: DeviceManager["removeStale"];
  readonly capacity: DeviceManager["capacity"];
  readonly allocatable: DeviceManager["allocatable"];
  readonly stats: DeviceManager["stats"];
  readonly onChange: DeviceManager["onChange"];

  constructor(
    private readonly core: DeviceManagerCore,
    private readonly input: AgentDeviceManagerInput,
    private readonly logger: Logger,
  ) {
    this.admit = (pod, active) => core.admit(pod, active);
    this.prepare = (pod, signal) => core.prepare(pod, signal);
    this.containerOptions = (pod, c, signal) => core.containerOptions(pod, c, signal);
    this.containerDevices = (uid, name) => core.containerDevices(uid, name);
    this.resourceStatus = (uid, name) => core.resourceStatus(uid, name);
    this.removeStale = (uids) => core.removeStale(uids);
    this.capacity = () => core.capacity();
    this.allocatable = () => core.allocatable();
    this.stats = () => core.stats();
    this.onChange = (listener) => core.onChange(listener);
  }

  async run(signal: AbortSignal): Promise<void> {
    const { config } = this.input;
    const socketPath = `${config.devicePluginPath}/${KUBELET_SOCKET}`;
    // A folder that cannot be made or served (a read-only root) leaves plugins out, never the
    // agent: host devices and every pod without plugin devices go on.
    const server = await this.serve(socketPath).catch((error: unknown) => {
      this.logger.error("cannot serve device plugin registration: device plugins cannot register", {
        socket: socketPath,
        error,
      });
      return undefined;
    });
    if (server !== undefined)
      this.logger.info("serving device plugin registration", { socket: socketPath });
    try {
      await this.core.run(signal);
    } finally {
      server?.close();
      this.core.close();
    }
  }

  /** The Registration service on `socketPath`: each plugin it accepts connected and added. */
  private serve(socketPath: string) {
    const { config } = this.input;
    return startRegistrationServer({
      socketPath,
      logger: this.logger,
      onRegister: async (registration) => {
        const endpoint = await connectDevicePlugin(registration, {
          dir: config.devicePluginPath,
          logger: this.logger,
          callTimeoutMs: config.devicePluginCallTimeout,
          clock: this.input.clock,
        });
        this.core.addEndpoint(endpoint);
      },
    });
  }
}

/** Device counts as a node's resource quantities. */
export function countsAsQuantities(counts: Record<string, number>): Record<string, string> {
  return Object.fromEntries(Object.entries(counts).map(([name, n]) => [name, String(n)]));
}

/** The container manager's housekeeping, after which the devices of pods no longer active are
 * freed (housekeeping runs once every pod source was seen). */
export function withDeviceHousekeeping(
  cm: { housekeeping(active: readonly Pod[], keep: (uid: string) => boolean): Promise<void> },
  devices: Pick<DeviceManager, "removeStale">,
) {
  return {
    housekeeping: async (active: readonly Pod[], keep: (uid: string) => boolean) => {
      devices.removeStale(new Set(active.map((p) => p.metadata.uid ?? "")));
      await cm.housekeeping(active, keep);
    },
  };
}
