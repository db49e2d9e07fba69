// The mounts of a container: its volumeMounts (the volume manager's folders, prepared before the
// containers start; subPath and subPathExpr through the volume manager's safe bind mounts), the
// pod's managed /etc/hosts, and the termination message file (a fresh empty file per container
// instance, as kubelet mounts it).
//
// Paths (docs/runtime-contract.md):
//   <rootDir>/pods/<uid>/volumes/<plugin>/<volume>        (see ../volumes/paths.ts)
//   <rootDir>/pods/<uid>/etc-hosts
//   <rootDir>/pods/<uid>/containers/<container>/<random>

import { chmod, mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Container, Pod, VolumeMount } from "../../api/types.ts";
import type { KeyValue, Mount } from "../../cri/index.ts";
import type { VolumeManager } from "../volumes/index.ts";
import { podDir } from "../volumes/paths.ts";
import { ContainerConfigError, expand } from "./env.ts";

/** How containers reach their pod's volumes (the volume manager): the host path of a volume
 * and whether containers mount it read-only; the host path for a subPath mount (checked,
 * bind-mounted), throwing with the kubelet's message. */
export type ContainerVolumes = Pick<VolumeManager, "hostPath" | "subPath">;

export interface MountContext {
  rootDir: string;
  /** The pod's primary IP; "" for host-network pods. */
  podIP: string;
  /** The host's hosts file, copied for host-network pods: undefined when missing; throws when
   * unreadable. */
  hostHosts: () => string | undefined;
  /** Random suffix of the termination message file (8 hex digits). */
  random: () => string;
  volumes: ContainerVolumes;
}

/** kubelet's subPathExpr expansion: every $(VAR) must name a non-empty variable. */
function expandSubPath(expr: string, envs: KeyValue[]): string {
  const env = new Map(envs.map((e) => [e.key, e.value]));
  const missing = new Set<string>();
  const out = expand(expr, (name) => {
    const value = env.get(name);
    if (!value) missing.add(name);
    return value ?? "";
  });
  if (missing.size > 0)
    throw new ContainerConfigError(`missing value for ${[...missing].sort().join(", ")}`);
  return out;
}

async function volumeMount(
  pod: Pod,
  c: Container,
  vm: VolumeMount,
  index: number,
  envs: KeyValue[],
  ctx: MountContext,
): Promise<Mount> {
  const host = ctx.volumes.hostPath(pod, vm.name);
  if (!host) {
    throw new ContainerConfigError(
      `cannot find volume ${JSON.stringify(vm.name)} to mount into container ${JSON.stringify(c.name)}`,
    );
  }
  let hostPath = host.path;
  const subPath = vm.subPathExpr ? expandSubPath(vm.subPathExpr, envs) : (vm.subPath ?? "");
  if (subPath !== "") {
    try {
      const mount = { container: c.name, index, volume: vm.name, subPath };
      hostPath = await ctx.volumes.subPath(pod, mount);
    } catch (err) {
      throw new ContainerConfigError((err as Error).message);
    }
  }
  return { containerPath: vm.mountPath, hostPath, readonly: vm.readOnly === true || host.readOnly };
}

const MANAGED_HOSTS = [
  "# Kubernetes-managed hosts file.",
  "127.0.0.1\tlocalhost",
  "::1\tlocalhost ip6-localhost ip6-loopback",
  "fe00::0\tip6-localnet",
  "fe00::0\tip6-mcastprefix",
  "fe00::1\tip6-allnodes",
  "fe00::2\tip6-allrouters",
].join("\n");

/** Writes the pod's hosts file and returns its path. */
async function ensureHostsFile(pod: Pod, hostname: string, ctx: MountContext): Promise<string> {
  const dir = podDir(ctx.rootDir, pod.metadata.uid ?? "");
  await mkdir(dir, { recursive: true });
  const path = join(dir, "etc-hosts");
  let content: string;
  if (pod.spec.hostNetwork) {
    let host = "";
    try {
      host = ctx.hostHosts() ?? "";
    } catch {
      // unreadable: the pod gets the header line alone
    }
    content = `# Kubernetes-managed hosts file (host network).\n${host}`;
  } else {
    content = `${MANAGED_HOSTS}\n${ctx.podIP ? `${ctx.podIP}\t${hostname}\n` : ""}`;
  }
  await writeFile(path, content, { mode: 0o644 });
  return path;
}

async function terminationMessageMount(
  pod: Pod,
  c: Container,
  ctx: MountContext,
): Promise<Mount | undefined> {
  if (!c.terminationMessagePath) return undefined;
  const dir = join(podDir(ctx.rootDir, pod.metadata.uid ?? ""), "containers", c.name);
  await mkdir(dir, { recursive: true });
  const file = join(dir, ctx.random());
  await writeFile(file, "", { mode: 0o666 });
  await chmod(file, 0o666);
  return { containerPath: c.terminationMessagePath, hostPath: file };
}

/** All mounts of `c` (`envs`: its environment, for subPathExpr); creates the files they need.
 * Throws ContainerConfigError. */
export async function makeMounts(
  pod: Pod,
  c: Container,
  hostname: string,
  envs: KeyValue[],
  ctx: MountContext,
): Promise<Mount[]> {
  const mounts: Mount[] = [];
  for (const [i, vm] of (c.volumeMounts ?? []).entries())
    mounts.push(await volumeMount(pod, c, vm, i, envs, ctx));
  if (!mounts.some((m) => m.containerPath === "/etc/hosts")) {
    mounts.push({
      containerPath: "/etc/hosts",
      hostPath: await ensureHostsFile(pod, hostname, ctx),
    });
  }
  const tm = await terminationMessageMount(pod, c, ctx);
  if (tm) mounts.push(tm);
  return mounts;
}
