// An in-memory device plugin endpoint for the device manager's unit tests: the test sends lists
// and ends the stream, chooses the preferred answer and Allocate's answer (or error), and reads
// back every call made.
import type {
  ContainerAllocation,
  DevicePluginEndpoint,
  PluginDevice,
  PluginOptions,
} from "../../src/agent/cm/devicemanager/index.ts";

/** Devices with these ids, all healthy or all not. */
export function devicesOf(ids: readonly string[], healthy = true): PluginDevice[] {
  return ids.map((id) => ({ id, healthy }));
}

/** What a fake Allocate answers by default: one device node and one env per id. */
export function allocationFor(resource: string, ids: readonly string[]): ContainerAllocation {
  return {
    envs: { [`${resource.replace(/\W/g, "_").toUpperCase()}`]: ids.join(",") },
    mounts: [],
    devices: ids.map((id) => ({
      containerPath: `/dev/${id}`,
      hostPath: `/dev/${id}`,
      permissions: "rw",
    })),
    annotations: {},
    cdiDevices: [],
  };
}

export class FakeDeviceEndpoint implements DevicePluginEndpoint {
  readonly options: PluginOptions;
  /** Every call, in order. */
  readonly preferredCalls: { available: string[]; mustInclude: string[]; size: number }[] = [];
  readonly allocateCalls: string[][] = [];
  readonly preStartCalls: string[][] = [];
  closed = false;
  /** The preferred answer (default: the last `size` of `available`, so it differs from the
   * manager's own choice). */
  prefer: (available: string[], mustInclude: string[], size: number) => string[] = (a, m, size) => {
    const rest = a.filter((id) => !m.includes(id));
    return [...m, ...rest.slice(rest.length - (size - m.length))];
  };
  /** Allocate's answer for the ids, or an Error to reject with (a promise that never settles
   * makes a plugin that hangs). */
  answer: (ids: string[]) => ContainerAllocation | Error | Promise<ContainerAllocation>;
  private onDevices?: (devices: PluginDevice[]) => void;
  private onEnd?: (error?: Error) => void;

  constructor(
    readonly resourceName: string,
    options: Partial<PluginOptions> = {},
    /** Sent as soon as watch() starts, when given. */
    private readonly initial?: PluginDevice[],
  ) {
    this.options = {
      preStartRequired: options.preStartRequired ?? false,
      getPreferredAllocationAvailable: options.getPreferredAllocationAvailable ?? false,
    };
    this.answer = (ids) => allocationFor(resourceName, ids);
  }

  watch(onDevices: (devices: PluginDevice[]) => void, onEnd: (error?: Error) => void): void {
    this.onDevices = onDevices;
    this.onEnd = onEnd;
    if (this.initial !== undefined) onDevices(this.initial);
  }

  /** Sends a full list, as ListAndWatch does. */
  list(devices: PluginDevice[]): void {
    if (this.closed) throw new Error("list() on a closed fake endpoint");
    this.onDevices?.(devices.map((d) => ({ ...d })));
  }

  /** Ends the stream, as a plugin that exits. */
  end(error?: Error): void {
    if (!this.closed) this.onEnd?.(error);
  }

  async preferredAllocation(
    available: string[],
    mustInclude: string[],
    size: number,
  ): Promise<string[]> {
    this.preferredCalls.push({ available: [...available], mustInclude: [...mustInclude], size });
    return this.prefer(available, mustInclude, size);
  }

  async allocate(deviceIds: string[]): Promise<ContainerAllocation> {
    this.allocateCalls.push([...deviceIds]);
    const a = await this.answer(deviceIds);
    if (a instanceof Error) throw a;
    return a;
  }

  async preStartContainer(deviceIds: string[]): Promise<void> {
    this.preStartCalls.push([...deviceIds]);
  }

  close(): void {
    this.closed = true;
  }
}
