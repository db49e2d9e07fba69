// The CreateContainer config of one container instance, as kubelet's generateContainerConfig
// builds it: metadata {name, attempt = restartCount}, the image id, command/args expanded against
// the environment, env, working dir, mounts, the log path "<container>/<restartCount>.log"
// (relative to the sandbox's log directory), labels/annotations (docs/runtime-contract.md),
// resources and security context.

import { readdir } from "node:fs/promises";
import { join } from "node:path";
import type { Container, Pod } from "../../api/types.ts";
import type { ContainerConfig } from "../../cri/index.ts";
import { type EnvContext, expandCommandAndArgs, makeEnvironment } from "./env.ts";
import { containerAnnotations, containerLabels } from "./labels.ts";
import { type MountContext, makeMounts } from "./mounts.ts";
import { containerResources } from "./resources.ts";
import { containerSecurityContext } from "./security.ts";

export interface ContainerConfigContext {
  env: EnvContext;
  mounts: MountContext;
  /** The pod's hostname (for its hosts file). */
  hostname: string;
  nodeMemoryBytes: number;
  /** The CPU manager's cpuset for the container ("" or absent: the runtime's default). */
  cpusetCpus?: string;
  /** The image to create from: the id the image manager resolved. */
  imageRef: string;
}

function containerLogPath(name: string, restartCount: number): string {
  return `${name}/${restartCount}.log`;
}

/**
 * Throws ContainerConfigError when the spec cannot be turned into a config (a bad fieldRef, a
 * missing volume); other errors (file system) are thrown as they are.
 */
export async function generateContainerConfig(
  pod: Pod,
  c: Container,
  restartCount: number,
  ctx: ContainerConfigContext,
): Promise<ContainerConfig> {
  const envs = makeEnvironment(pod, c, ctx.env);
  const { command, args } = expandCommandAndArgs(c, envs);
  const config: ContainerConfig = {
    metadata: { name: c.name, attempt: restartCount },
    image: { image: ctx.imageRef, userSpecifiedImage: c.image },
    command,
    args,
    workingDir: c.workingDir ?? "",
    envs,
    mounts: await makeMounts(pod, c, ctx.hostname, envs, ctx.mounts),
    labels: containerLabels(pod, c),
    annotations: containerAnnotations(pod, c, restartCount),
    logPath: containerLogPath(c.name, restartCount),
    stdin: c.stdin === true,
    stdinOnce: c.stdinOnce === true,
    tty: c.tty === true,
    linux: {
      resources: containerResources(pod, c, ctx.nodeMemoryBytes, ctx.cpusetCpus),
      securityContext: containerSecurityContext(pod, c),
    },
  };
  return config;
}

/**
 * The restart count of a container the runtime no longer knows (state lost, e.g. after a
 * reboot): one more than the highest "<n>.log" in its log folder, so logs are not overwritten.
 */
export async function restartCountFromLogDir(podLogDir: string, name: string): Promise<number> {
  let entries: string[];
  try {
    entries = await readdir(join(podLogDir, name));
  } catch {
    return 0;
  }
  let max = -1;
  for (const e of entries) {
    const m = /^(\d+)\.log/.exec(e);
    if (m) max = Math.max(max, Number(m[1]));
  }
  return max + 1;
}
