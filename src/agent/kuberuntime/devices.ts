// What a container's devices add to its CRI config (the kubelet's device run options): the device
// nodes with their cgroup permissions, the plugins' mounts, env and annotations, and CDI device
// names — in the CRI field for runtimes that resolve CDI, and as the annotations older runtimes
// read (cdi.k8s.io/…), so either kind finds them.
import type { ContainerConfig } from "../../cri/index.ts";
import type { ContainerAllocation } from "../cm/devicemanager/index.ts";

/** The CDI annotation key of a container's devices (one key per container; a CDI annotation
 * value is a comma-separated list of qualified device names). */
const CDI_ANNOTATION_PREFIX = "cdi.k8s.io/";

/** `config` with the container's devices: plugin env first, so the container's own env wins a
 * name both set; mounts after the volumes; device annotations under the container's own. */
export function withDevices(
  config: ContainerConfig,
  devices: ContainerAllocation | undefined,
): ContainerConfig {
  if (devices === undefined) return config;
  const envs = Object.entries(devices.envs).map(([key, value]) => ({ key, value }));
  const mounts = devices.mounts.map((m) => ({
    containerPath: m.containerPath,
    hostPath: m.hostPath,
    readonly: m.readOnly,
  }));
  const annotations = { ...devices.annotations, ...config.annotations };
  if (devices.cdiDevices.length > 0)
    annotations[`${CDI_ANNOTATION_PREFIX}fleetlet_${config.metadata.name}`] =
      devices.cdiDevices.join(",");
  return {
    ...config,
    envs: [...envs, ...(config.envs ?? [])],
    mounts: [...(config.mounts ?? []), ...mounts],
    devices: [...(config.devices ?? []), ...devices.devices],
    annotations,
    ...(devices.cdiDevices.length > 0 && {
      CDIDevices: devices.cdiDevices.map((name) => ({ name })),
    }),
  };
}
