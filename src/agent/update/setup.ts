// The agent's part in its own updates, as the agent wires it: an agent the launcher rolled back
// to says so (log and node event) at start, and an agent on trial tells the launcher once it is
// healthy: the runtime answered, the pods were synced from every source, and the hub was
// reached, or was not reached within half the trial's limit (a hub that is down must not roll a
// good agent back).
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import { updateDir } from "./install.ts";
import { runTrialWatch, takeRollback } from "./trial.ts";

export interface AgentUpdatesInput {
  rootDir: string;
  clock: Clock;
  logger: Logger;
  /** The launcher's environment (FLEETLET_TRIAL, FLEETLET_TRIAL_LIMIT). */
  env: Record<string, string | undefined>;
  nodeEvent(type: "Normal" | "Warning", reason: string, message: string): void;
  runtimeHealthy(): boolean;
  podsSynced(): boolean;
  /** undefined: no hub configured. */
  hubConnected: (() => boolean) | undefined;
}

/** Reports a rollback found at start; returns the trial's watch to run with the agent. */
export function setupAgentUpdates(input: AgentUpdatesInput): {
  run(signal: AbortSignal): Promise<void>;
} {
  const dir = updateDir(input.rootDir);
  const log = input.logger.with({ component: "update" });
  const rollback = takeRollback(dir);
  if (rollback !== undefined) {
    const message = `The launcher rolled the agent back from ${rollback.from} to ${rollback.to}: ${rollback.reason}`;
    log.warn("the launcher rolled the agent back", { ...rollback });
    input.nodeEvent("Warning", "AgentRolledBack", message);
  }
  const limitMs = Number(input.env.FLEETLET_TRIAL_LIMIT ?? "120") * 1000;
  const started = input.clock.monotonic();
  const hubDone = () => {
    if (input.hubConnected === undefined || input.hubConnected()) return true;
    return input.clock.monotonic() - started >= limitMs / 2;
  };
  return {
    run: (signal) =>
      runTrialWatch(
        {
          trial: input.env.FLEETLET_TRIAL,
          dir,
          clock: input.clock,
          logger: log,
          ready: () => input.runtimeHealthy() && input.podsSynced() && hubDone(),
        },
        signal,
      ),
  };
}
