// The test device plugin (device-plugin.ts) as a process, for e2e tests:
//   bun test/lib/device-plugin-main.ts CONFIG.json
// It serves its socket and registers at start; like real plugins, it starts again (a new socket)
// and registers again whenever kubelet.sock is created anew in the folder (the agent restarted
// and removed every socket). SIGHUP re-reads the config and sends its device list; SIGTERM
// stops it. Each successful registration prints one line "registered" on stdout, each Allocate
// and PreStartContainer call one line "<method> <ids joined by ,>"; the rest goes to stderr.
import { existsSync, type FSWatcher, lstatSync, readFileSync, watch } from "node:fs";
import { join } from "node:path";
import { KUBELET_SOCKET } from "../../src/agent/cm/devicemanager/api.ts";
import { GrpcStatus } from "../../src/cri/errors.ts";
import { TransportError } from "../../src/cri/grpc-wire.ts";
import { type TestDevice, TestDevicePlugin } from "./device-plugin.ts";

/** The config file (JSON). */
export interface DevicePluginProcessConfig {
  dir: string;
  socketName: string;
  resourceName: string;
  devices: TestDevice[];
  preStartRequired?: boolean;
  preferredAvailable?: boolean;
  /** Device ids in order of preference for GetPreferredAllocation (mustInclude first). */
  preference?: string[];
  /** Allocate sets this environment variable to the ids, joined by ",". */
  env?: string;
  /** Allocate gives these host device nodes, at the same path in the container, "rw". */
  deviceNodes?: Record<string, string>;
  hangAllocate?: boolean;
  apiVersion?: string;
}

const log = (msg: string) => process.stderr.write(`device-plugin: ${msg}\n`);

function readConfig(path: string): DevicePluginProcessConfig {
  return JSON.parse(readFileSync(path, "utf8")) as DevicePluginProcessConfig;
}

function pluginOf(c: DevicePluginProcessConfig): TestDevicePlugin {
  const rank = (id: string) => {
    const i = c.preference?.indexOf(id) ?? -1;
    return i < 0 ? Number.MAX_SAFE_INTEGER : i;
  };
  return new TestDevicePlugin({
    dir: c.dir,
    socketName: c.socketName,
    resourceName: c.resourceName,
    devices: c.devices,
    preStartRequired: c.preStartRequired,
    preferredAvailable: c.preferredAvailable,
    preferred: (available, mustInclude, size) => {
      const rest = available.filter((id) => !mustInclude.includes(id));
      rest.sort((a, b) => rank(a) - rank(b));
      return [...mustInclude, ...rest].slice(0, size);
    },
    envsFor: (ids) => (c.env ? { [c.env]: ids.join(",") } : {}),
    deviceNodes: (ids) =>
      ids.flatMap((id) => {
        const path = c.deviceNodes?.[id];
        return path ? [{ containerPath: path, hostPath: path, permissions: "rw" }] : [];
      }),
    hangAllocate: c.hangAllocate,
    apiVersion: c.apiVersion,
    onCall: (method, ids) => process.stdout.write(`${method} ${ids.join(",")}\n`),
  });
}

/** Which kubelet.sock is there now (its inode and change time: a socket made anew may get the
 * inode of the one removed), or undefined when it is not there. */
function kubeletSocketIno(dir: string): string | undefined {
  try {
    const s = lstatSync(join(dir, KUBELET_SOCKET));
    return s.isSocket() ? `${s.ino}:${s.ctimeMs}` : undefined;
  } catch {
    return undefined;
  }
}

/** Registers at each new kubelet.sock, serving its socket again first when the agent removed
 * it; tries again for a few seconds while kubelet.sock cannot be reached (the agent may have made
 * it but not listen yet).
 * Remembers which kubelet.sock (inode) it registered at. */
class Registrar {
  private registeredIno: string | undefined;
  /** A registration runs now. */
  private busy = false;
  /** kubelet.sock changed while one ran: check again after it. */
  private again = false;

  constructor(private readonly plugin: TestDevicePlugin) {}

  async maybeRegister(): Promise<void> {
    if (this.busy) {
      this.again = true;
      return;
    }
    this.busy = true;
    try {
      do {
        this.again = false;
        await this.registerOnce();
      } while (this.again);
    } finally {
      this.busy = false;
    }
  }

  private async registerOnce(): Promise<void> {
    const ino = kubeletSocketIno(this.plugin.options.dir);
    if (ino === undefined || ino === this.registeredIno) return;
    if (!existsSync(this.plugin.socketPath)) {
      this.plugin.stop();
      await this.plugin.start();
    }
    for (let attempt = 1; attempt <= 50; attempt++) {
      try {
        await this.plugin.register();
        this.registeredIno = ino;
        process.stdout.write("registered\n");
        return;
      } catch (err) {
        log(`registration failed: ${(err as Error).message}`);
        const cause = (err as Error).cause;
        const unreachable =
          cause instanceof TransportError && cause.code === GrpcStatus.UNAVAILABLE;
        if (!unreachable) return; // refused: a new kubelet.sock is the next chance
        await Bun.sleep(100);
      }
    }
  }
}

async function main(): Promise<void> {
  const configPath = process.argv[2];
  if (configPath === undefined) throw new Error("usage: device-plugin-main.ts CONFIG.json");
  const config = readConfig(configPath);
  const plugin = pluginOf(config);
  const registrar = new Registrar(plugin);
  await plugin.start();
  const watcher: FSWatcher = watch(config.dir, (_event, name) => {
    if (name === KUBELET_SOCKET) void registrar.maybeRegister();
  });
  await registrar.maybeRegister();
  process.on("SIGHUP", () => {
    const next = readConfig(configPath);
    plugin.setDevices(next.devices);
    log(`devices: ${next.devices.length}`);
  });
  process.on("SIGTERM", () => {
    watcher.close();
    plugin.stop();
    process.exit(0);
  });
}

main().catch((err) => {
  log((err as Error).message);
  process.exit(1);
});
