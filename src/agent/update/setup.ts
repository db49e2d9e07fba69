// The agent's part in its own updates, as the agent wires it (docs/agent-updates.md): with a hub,
// the update manager that takes the hub's offers; an agent the launcher rolled back to says so
// (log, node event, and to the hub); an agent on trial tells the launcher once it is healthy
// (the runtime answered, the pods were synced from every source, and the hub was reached, or was
// not reached within half the trial's limit: a hub that is down must not roll a good agent
// back), and the hub that its update is done.
import { type PublicKey, parsePublicKey } from "../../release/keys.ts";
import type { Arch } from "../../release/manifest.ts";
import { type Clock, untilAborted } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import type { AgentConfig } from "../config/index.ts";
import { updateDir } from "./install.ts";
import { UpdateManager } from "./manager.ts";
import { runTrialWatch, takeRollback } from "./trial.ts";

export interface AgentUpdatesInput {
  config: Pick<AgentConfig, "rootDir" | "hub" | "updatePublicKeys" | "updateBandwidthLimit">;
  clock: Clock;
  logger: Logger;
  /** The agent's version (what it says "healthy" for). */
  version: string;
  /** The launcher's environment (FLEETLET_LAUNCHER, FLEETLET_TRIAL, FLEETLET_TRIAL_LIMIT). */
  env: Record<string, string | undefined>;
  nodeEvent(type: "Normal" | "Warning", reason: string, message: string): void;
  runtimeHealthy(): boolean;
  podsSynced(): boolean;
  /** Whether the hub connection is welcomed; undefined: no hub configured. */
  hubConnected: (() => boolean) | undefined;
  /** Stops the agent so that the launcher starts an installed version. */
  restart(): void;
}

/** The release version of a version folder's name ("0.2.0-3f1c0a9be2d7" → "0.2.0"). */
function versionOf(name: string): string {
  return name.replace(/-[0-9a-f]{12}$/, "");
}

/** Debian's name of this machine's architecture. */
function ownArch(): Arch {
  return process.arch === "arm64" ? "arm64" : "amd64";
}

async function trustedKeys(lines: readonly string[]): Promise<PublicKey[]> {
  const keys: PublicKey[] = [];
  for (const [i, line] of lines.entries()) {
    try {
      keys.push(await parsePublicKey(line));
    } catch (err) {
      throw new Error(`updatePublicKeys.${i}: ${(err as Error).message}`);
    }
  }
  return keys;
}

/** Reports a rollback found at start; returns the update manager (with a hub) and the trial's
 * watch to run with the agent. Throws for a trusted key that is not one. */
export async function setupAgentUpdates(input: AgentUpdatesInput): Promise<{
  manager: UpdateManager | undefined;
  run(signal: AbortSignal): Promise<void>;
}> {
  const { config, env } = input;
  const dir = updateDir(config.rootDir);
  const log = input.logger.with({ component: "update" });
  const manager =
    config.hub === undefined
      ? undefined
      : new UpdateManager({
          dir,
          keys: await trustedKeys(config.updatePublicKeys),
          arch: ownArch(),
          launched: env.FLEETLET_LAUNCHER !== undefined,
          bandwidthLimit: config.updateBandwidthLimit,
          clock: input.clock,
          logger: log,
          restart: input.restart,
        });
  const rollback = takeRollback(dir);
  if (rollback !== undefined) {
    const message = `The launcher rolled the agent back from ${rollback.from} to ${rollback.to}: ${rollback.reason}`;
    log.warn("the launcher rolled the agent back", { ...rollback });
    input.nodeEvent("Warning", "AgentRolledBack", message);
    const version = versionOf(rollback.from);
    manager?.report({ version, phase: "rolled-back", reason: rollback.reason, message });
  }
  const limitMs = Number(env.FLEETLET_TRIAL_LIMIT ?? "120") * 1000;
  const started = input.clock.monotonic();
  const hubDone = () => {
    if (input.hubConnected === undefined || input.hubConnected()) return true;
    return input.clock.monotonic() - started >= limitMs / 2;
  };
  const trial = {
    trial: env.FLEETLET_TRIAL,
    dir,
    clock: input.clock,
    logger: log,
    ready: () => input.runtimeHealthy() && input.podsSynced() && hubDone(),
    onHealthy: () => manager?.report({ version: input.version, phase: "healthy" }),
  };
  return {
    manager,
    run: async (signal) => {
      try {
        await runTrialWatch(trial, signal);
        // The stop may have come during the trial: then this returns at once.
        await untilAborted(signal);
      } finally {
        manager?.close();
      }
    },
  };
}
