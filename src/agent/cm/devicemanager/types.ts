// The device manager's vocabulary (the kubelet's cm/devicemanager): devices as plugins list
// them, what Allocate gives a container, and the endpoint every plugin is reached through —
// a device plugin over gRPC on its socket (endpoint.ts) or the built-in host devices
// (host-devices.ts). docs/devices.md describes the whole manager.

/** One device as its plugin lists it (ListAndWatch). */
export interface PluginDevice {
  /** The plugin's id for it (at most 63 characters in the API). */
  id: string;
  healthy: boolean;
  /** NUMA nodes from the device's topology; absent when the plugin gives none. */
  numaNodes?: number[];
}

/** What a plugin's options say (GetDevicePluginOptions / RegisterRequest.options). */
export interface PluginOptions {
  /** PreStartContainer before each start of a container with its devices. */
  preStartRequired: boolean;
  /** GetPreferredAllocation may be called. */
  getPreferredAllocationAvailable: boolean;
}

/** What Allocate gives one container (ContainerAllocateResponse). */
export interface ContainerAllocation {
  envs: Record<string, string>;
  mounts: { containerPath: string; hostPath: string; readOnly: boolean }[];
  devices: { containerPath: string; hostPath: string; permissions: string }[];
  annotations: Record<string, string>;
  /** Fully qualified CDI device names ("vendor.com/class=name"). */
  cdiDevices: string[];
}

/** A registration as the Registration service received it, checked. */
export interface Registration {
  version: string;
  /** The plugin's socket: a file name in the device plugin folder. */
  endpoint: string;
  resourceName: string;
  options: PluginOptions;
}

/** How the device manager reaches one plugin. Every call takes a signal; the gRPC endpoint
 * also applies its own deadlines (the kubelet's: 30 s for PreStartContainer). */
export interface DevicePluginEndpoint {
  readonly resourceName: string;
  readonly options: PluginOptions;
  /** Starts the device list stream (ListAndWatch): `onDevices` gets every full list the plugin
   * sends, `onEnd` once when the stream ends (the plugin is gone; error when it failed). Called
   * once per endpoint. */
  watch(onDevices: (devices: PluginDevice[]) => void, onEnd: (error?: Error) => void): void;
  /** GetPreferredAllocation for one container: `size` ids out of `available`, with every one of
   * `mustInclude`. Only called when options.getPreferredAllocationAvailable. */
  preferredAllocation(
    available: string[],
    mustInclude: string[],
    size: number,
    signal?: AbortSignal,
  ): Promise<string[]>;
  /** Allocate for one container's devices. */
  allocate(deviceIds: string[], signal?: AbortSignal): Promise<ContainerAllocation>;
  /** PreStartContainer with one container's devices. Only called when options.preStartRequired. */
  preStartContainer(deviceIds: string[], signal?: AbortSignal): Promise<void>;
  /** Ends the stream and the connection; onEnd is not called after close. */
  close(): void;
}

/** One container's devices, as checkpointed (the kubelet's PodDevicesEntry). */
export interface ContainerDevicesEntry {
  podUid: string;
  containerName: string;
  resourceName: string;
  deviceIds: string[];
  allocation: ContainerAllocation;
}
