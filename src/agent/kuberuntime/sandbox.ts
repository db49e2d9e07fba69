// Creating a pod's sandbox: the log folder first (the runtime writes container logs into it),
// then RunPodSandbox, then (unless it uses the host's network) its status for the pod IP.

import { mkdir } from "node:fs/promises";
import type { Pod } from "../../api/types.ts";
import type { PodSandboxConfig } from "../../cri/index.ts";
import type { Core, SyncRun } from "./core.ts";
import { errorMessage } from "./format.ts";
import { generateSandboxConfig, readResolvConf } from "./sandbox-config.ts";
import { toSandboxStatus } from "./status.ts";

export async function sandboxConfigFor(
  core: Core,
  pod: Pod,
  attempt: number,
): Promise<PodSandboxConfig> {
  const hostResolvConf = await readResolvConf(
    core.hostFiles,
    core.deps.resolvConfPath ?? "/etc/resolv.conf",
  );
  return generateSandboxConfig(pod, attempt, {
    podLogsDir: core.deps.podLogsDir,
    hostResolvConf,
    cgroupParent: core.deps.podCgroupParent?.(pod) ?? "",
  });
}

/** Runs a new sandbox for `run.pod`; on success sets run.sandboxId and run.podIPs. */
export async function createSandbox(
  core: Core,
  run: SyncRun,
  attempt: number,
  /** The sync's sandbox config (shared with the containers it starts). */
  sandboxConfig: (attempt: number) => Promise<PodSandboxConfig>,
): Promise<boolean> {
  const { pod } = run;
  try {
    const config = await sandboxConfig(attempt);
    await mkdir(config.logDirectory ?? "", { recursive: true, mode: 0o755 });
    const res = await core.startCall(
      pod,
      () => core.deps.cri.runPodSandbox({ config }, core.lifecycle(0, run.signal)),
      run.signal,
    );
    run.sandboxId = res.podSandboxId;
    run.attempt = attempt;
    run.changes.sandboxes.push(res.podSandboxId);
    // Only the pod IPs are wanted from the sandbox's status; a host-network pod has none of its
    // own, so it is spared the call (one fewer round trip between its sandbox and containers).
    if (pod.spec.hostNetwork) {
      run.podIPs = [];
      return true;
    }
    const status = await core.deps.cri.podSandboxStatus({ podSandboxId: res.podSandboxId });
    run.podIPs = status.status ? toSandboxStatus(status.status).ips : [];
    return true;
  } catch (err) {
    const detail = errorMessage(err);
    core.event(pod, "Warning", "FailedCreatePodSandBox", `Failed to create pod sandbox: ${detail}`);
    run.errors.push({
      action: "createSandbox",
      target: pod.metadata.name,
      reason: "CreatePodSandboxError",
      message: `Cannot create the sandbox of pod ${JSON.stringify(pod.metadata.name)}: ${detail}`,
    });
    return false;
  }
}
