// The mounts of a container: its volumeMounts (emptyDir folders under the pod dir, hostPath
// paths checked or created by type), the pod's managed /etc/hosts, and the termination message
// file (a fresh empty file per container instance, as kubelet mounts it).
//
// Paths (docs/runtime-contract.md):
//   <rootDir>/pods/<uid>/volumes/kubernetes.io~empty-dir/<volume>
//   <rootDir>/pods/<uid>/etc-hosts
//   <rootDir>/pods/<uid>/containers/<container>/<random>

import { chmod, mkdir, stat, writeFile } from "node:fs/promises";
import { isAbsolute, join, normalize } from "node:path";
import type { Container, Pod, Volume, VolumeMount } from "../../api/types.ts";
import type { Mount } from "../../cri/index.ts";
import { ContainerConfigError } from "./env.ts";

export interface MountContext {
  rootDir: string;
  /** The pod's primary IP; "" for host-network pods. */
  podIP: string;
  /** The host's hosts file, copied for host-network pods: undefined when missing; throws when
   * unreadable. */
  hostHosts: () => string | undefined;
  /** Random suffix of the termination message file (8 hex digits). */
  random: () => string;
}

export function podDir(rootDir: string, uid: string): string {
  return join(rootDir, "pods", uid);
}

export function emptyDirPath(rootDir: string, uid: string, volume: string): string {
  return join(podDir(rootDir, uid), "volumes", "kubernetes.io~empty-dir", volume);
}

async function kindOf(
  path: string,
): Promise<"dir" | "file" | "socket" | "char" | "block" | "none"> {
  try {
    const s = await stat(path);
    if (s.isDirectory()) return "dir";
    if (s.isSocket()) return "socket";
    if (s.isCharacterDevice()) return "char";
    if (s.isBlockDevice()) return "block";
    return "file";
  } catch {
    return "none";
  }
}

const EXPECTED_KIND = {
  Directory: "dir",
  File: "file",
  Socket: "socket",
  CharDevice: "char",
  BlockDevice: "block",
} as const;

async function prepareHostPath(volume: Volume & { hostPath: { path: string } }): Promise<string> {
  const { path, type = "" } = volume.hostPath;
  const kind = await kindOf(path);
  if (type === "DirectoryOrCreate" && kind === "none")
    await mkdir(path, { recursive: true, mode: 0o755 });
  else if (type === "FileOrCreate" && kind === "none") await writeFile(path, "", { mode: 0o644 });
  else if (type !== "" && type !== "DirectoryOrCreate" && type !== "FileOrCreate") {
    if (kind !== EXPECTED_KIND[type]) {
      throw new ContainerConfigError(
        `hostPath volume ${JSON.stringify(volume.name)}: ${path} is not a ${type} (found ${kind})`,
      );
    }
  }
  return path;
}

async function volumeHostPath(pod: Pod, vm: VolumeMount, rootDir: string): Promise<string> {
  const volume = pod.spec.volumes?.find((v) => v.name === vm.name);
  if (!volume) {
    throw new ContainerConfigError(
      `cannot find volume ${JSON.stringify(vm.name)} to mount at ${vm.mountPath}`,
    );
  }
  if (volume.emptyDir) {
    const dir = emptyDirPath(rootDir, pod.metadata.uid ?? "", volume.name);
    await mkdir(dir, { recursive: true });
    await chmod(dir, 0o777);
    return dir;
  }
  if (volume.hostPath) return prepareHostPath({ ...volume, hostPath: volume.hostPath });
  throw new ContainerConfigError(`volume ${JSON.stringify(vm.name)} has no supported source`);
}

async function volumeMount(pod: Pod, vm: VolumeMount, rootDir: string): Promise<Mount> {
  let hostPath = await volumeHostPath(pod, vm, rootDir);
  if (vm.subPath) {
    const sub = normalize(vm.subPath);
    if (isAbsolute(sub) || sub.startsWith("..")) {
      throw new ContainerConfigError(
        `subPath ${JSON.stringify(vm.subPath)} must stay inside volume ${vm.name}`,
      );
    }
    hostPath = join(hostPath, sub);
    if ((await kindOf(hostPath)) === "none")
      await mkdir(hostPath, { recursive: true, mode: 0o755 });
  }
  return { containerPath: vm.mountPath, hostPath, readonly: vm.readOnly === true };
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
export async function ensureHostsFile(
  pod: Pod,
  hostname: string,
  ctx: MountContext,
): Promise<string> {
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

/** All mounts of `c`; creates the folders and files they need. Throws ContainerConfigError. */
export async function makeMounts(
  pod: Pod,
  c: Container,
  hostname: string,
  ctx: MountContext,
): Promise<Mount[]> {
  const mounts: Mount[] = [];
  for (const vm of c.volumeMounts ?? []) mounts.push(await volumeMount(pod, vm, ctx.rootDir));
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
