// `fleetlet agent`: runs the agent until SIGTERM or SIGINT. Pods keep running when it stops.
import { runAgent } from "../agent/agent.ts";
import { ConfigError, loadAgentConfig } from "../agent/config/index.ts";
import { createLogger } from "../util/log.ts";
import { CliError } from "./errors.ts";

export async function agentCommand(argv: string[]): Promise<number> {
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
