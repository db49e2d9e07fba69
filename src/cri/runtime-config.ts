// What a runtime says of its own configuration. containerd 2.0 and later answer the CRI's
// RuntimeConfig with their cgroup driver; containerd 1.x answers UNIMPLEMENTED there but puts
// its whole CRI plugin config, as JSON, under info.config of a verbose Status (sandboxImage,
// the default runtime and each runtime's runc options such as SystemdCgroup).
import { isCriError } from "./errors.ts";
import type { CallOptions, CriRuntime } from "./service.ts";

type CgroupDriver = "systemd" | "cgroupfs";

/** The runtime's cgroup driver and where it was read, for a message a user can act on. */
export interface RuntimeCgroupDriver {
  driver: CgroupDriver;
  source: string;
}

/** containerd's CRI config from a verbose Status; undefined for a runtime that gives none
 * there (CRI-O) or gives something that is not a JSON object. */
export async function containerdConfig(
  cri: Pick<CriRuntime, "status">,
  opts?: CallOptions,
): Promise<Record<string, unknown> | undefined> {
  const res = await cri.status({ verbose: true }, opts);
  try {
    const config: unknown = JSON.parse(res.info.config ?? "");
    return isObject(config) ? config : undefined;
  } catch {
    return undefined;
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The driver containerd 1.x's CRI config gives its default runtime: runc's SystemdCgroup
 * option, or the old top-level systemdCgroup (for the v1 shim); undefined when the config
 * names no default runtime. */
export function driverFromContainerdConfig(
  config: Record<string, unknown>,
): RuntimeCgroupDriver | undefined {
  if (config.systemdCgroup === true)
    return { driver: "systemd", source: "containerd's CRI config: systemd_cgroup = true" };
  const containerd = isObject(config.containerd) ? config.containerd : {};
  const name = containerd.defaultRuntimeName;
  const runtimes = isObject(containerd.runtimes) ? containerd.runtimes : {};
  if (typeof name !== "string" || !Object.hasOwn(runtimes, name)) return undefined;
  const runtime = runtimes[name];
  const options = isObject(runtime) && isObject(runtime.options) ? runtime.options : {};
  const systemd = options.SystemdCgroup === true;
  return {
    driver: systemd ? "systemd" : "cgroupfs",
    source: `containerd's CRI config: runtime "${name}" has SystemdCgroup = ${systemd}`,
  };
}

/** The runtime's cgroup driver: from RuntimeConfig, else from containerd 1.x's config; undefined
 * when the runtime says neither. Rejects when the runtime does not answer. */
export async function runtimeCgroupDriver(
  cri: Pick<CriRuntime, "runtimeConfig" | "status">,
  opts?: CallOptions,
): Promise<RuntimeCgroupDriver | undefined> {
  try {
    const res = await cri.runtimeConfig({}, opts);
    if (res.linux === null) return undefined;
    const driver = res.linux.cgroupDriver === "SYSTEMD" ? "systemd" : "cgroupfs";
    return { driver, source: `the runtime's RuntimeConfig: cgroup driver ${driver}` };
  } catch (err) {
    if (!isCriError(err) || err.code !== "Unimplemented") throw err;
  }
  const config = await containerdConfig(cri, opts);
  return config === undefined ? undefined : driverFromContainerdConfig(config);
}
