// `fleetlet agent`: runs the agent until SIGTERM or SIGINT. Pods keep running when it stops.
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

--hub (hub.url) takes one hub URL or the URLs of a hub's replicas, comma-separated (in the file
also a YAML list); one CA verifies them all, and the device joins once. Each round tries every
URL once, in a random order; the backoff (hubReconnectBackOffBase, hubReconnectBackOffMax) waits
between rounds.

Only in the config file: hubPodPolicy (what the hub's pods may do on this device: allowPrivileged,
allowHostNetwork, allowHostPID, allowHostIPC, allowedHostPathPrefixes, allowedRegistries,
allowedCapabilities, maxPods; safe defaults, see docs/deploy.md) and hostDevices (device groups by
path glob that pods ask for as extended resources: name, paths, podsPerDevice; see docs/devices.md).
`;
}

/**
 * How much more reluctant than normal JavaScriptCore's JIT is in the agent (Bun's JIT policy: its
 * tier-up thresholds times this). Most of the agent's code runs a few times per pod or per
 * minute; compiling it in the optimizing tiers costs memory (the code, the compilers' working
 * memory) and CPU on the compiler threads. Measured (scripts/bench/README.md, agent-memory):
 * the probes bench (50 pods, 100 probes a second) 67-69 MB and 5.0-5.4 % of a core against
 * 81-82 MB and 4.2-4.3 % at the normal policy; a 30-pod burst's CPU no higher.
 */
export const AGENT_JIT_POLICY = 1000;

export async function agentCommand(argv: string[]): Promise<number> {
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(agentUsage());
    return 0;
  }
  // Before the agent's modules load, so that their start-up code stays in the interpreter too.
  Bun.unsafe.setJITPolicy(AGENT_JIT_POLICY);
  const { runAgent } = await import("../agent/agent.ts");
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
    // An installed update: stop, and the launcher starts the new version (pods keep running).
    const restart = () => onSignal("an agent update");
    await runAgent(config, { logger, restart }, stop.signal);
  } catch (err) {
    throw new CliError(`agent failed: ${(err as Error).message}`);
  }
  return 0;
}
