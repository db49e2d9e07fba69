// `fleetlet agent`: runs the agent until SIGTERM or SIGINT. Pods keep running when it stops.
import { runAgent } from "../agent/agent.ts";
import { agentFlagList, ConfigError, loadAgentConfig } from "../agent/config/index.ts";
import { createLogger } from "../util/log.ts";
import { CliError } from "./errors.ts";

function agentUsage(): string {
  const list = agentFlagList();
  const width = Math.max(34, ...list.map(({ flag }) => flag.length));
  const flags = list.map(({ flag, field }) => `  ${flag.padEnd(width)} ${field}`).join("\n");
  return `usage: fleetlet agent [--config FILE] [flags]

Runs the pods of the manifest folder on this device, and with --hub the pods the hub sends it.
The config file (YAML) takes the fields below by name; a flag sets the same field and wins over
the file. Durations are "20s", "5m".

  ${"--config FILE".padEnd(width)} the agent's config file (or env FLEETLET_CONFIG)
${flags}

Only in the config file: hubPodPolicy (what the hub's pods may do on this device: allowPrivileged,
allowHostNetwork, allowHostPID, allowHostIPC, allowedHostPathPrefixes, allowedRegistries,
maxPods; safe defaults, see docs/deploy.md).
`;
}

export async function agentCommand(argv: string[]): Promise<number> {
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(agentUsage());
    return 0;
  }
  let config: Awaited<ReturnType<typeof loadAgentConfig>>;
  try {
    config = await loadAgentConfig(argv, process.env);
  } catch (err) {
    if (err instanceof ConfigError) throw new CliError(err.message, 2);
    throw err;
  }
  const logger = createLogger({ level: config.logLevel, format: config.logFormat });
  const stop = new AbortController();
  const onSignal = (sig: string) => {
    if (stop.signal.aborted) return;
    logger.info(`received ${sig}; stopping the agent (pods keep running)`);
    stop.abort(new Error(sig));
  };
  process.on("SIGTERM", () => onSignal("SIGTERM"));
  process.on("SIGINT", () => onSignal("SIGINT"));
  try {
    await runAgent(config, { logger }, stop.signal);
  } catch (err) {
    throw new CliError(`agent failed: ${(err as Error).message}`);
  }
  return 0;
}
