// The agent and the runtime must make cgroups the same way: with the cgroupfs driver the agent
// hands the runtime cgroup paths, with systemd slice names, and a runtime set the other way
// fails every container start with runc's own words. So the agent asks the runtime at start
// (runtime-config.ts in the CRI client says how) and refuses a mismatch with one line.
import { type CriRuntime, runtimeCgroupDriver } from "../../cri/index.ts";
import type { Logger } from "../../util/log.ts";
import type { AgentConfig } from "../config/index.ts";

/** How long the start waits for the runtime's answer; a runtime still down is checked never
 * (its containers would fail with runc's message instead). */
const ASK_TIMEOUT_MS = 5000;

export class CgroupDriverMismatch extends Error {
  override readonly name = "CgroupDriverMismatch";
}

/** Resolves when the runtime's driver is the agent's, or cannot be known (logged); rejects with
 * a CgroupDriverMismatch saying what to change otherwise. */
export async function checkCgroupDriver(
  config: Pick<AgentConfig, "cgroupDriver">,
  cri: Pick<CriRuntime, "runtimeConfig" | "status">,
  logger: Logger,
): Promise<void> {
  let found: Awaited<ReturnType<typeof runtimeCgroupDriver>>;
  try {
    found = await runtimeCgroupDriver(cri, { timeoutMs: ASK_TIMEOUT_MS });
  } catch (err) {
    logger.warn("cannot check the runtime's cgroup driver; going on with the agent's", {
      cgroupDriver: config.cgroupDriver,
      error: (err as Error).message,
    });
    return;
  }
  if (found === undefined) {
    logger.info("the runtime does not say its cgroup driver; going on with the agent's", {
      cgroupDriver: config.cgroupDriver,
    });
    return;
  }
  if (found.driver === config.cgroupDriver) return;
  const fix =
    found.driver === "systemd"
      ? `set cgroupDriver: "systemd" in the agent config, or SystemdCgroup = false in the runtime's runc options and restart it`
      : 'set cgroupDriver: "cgroupfs" in the agent config';
  throw new CgroupDriverMismatch(
    `the runtime uses the ${found.driver} cgroup driver (${found.source}) but the agent's cgroupDriver is ${config.cgroupDriver}: ${fix}`,
  );
}
