// The agent's own settings: the agent config (a YAML file and flags for the same fields).
// The pods it runs and the objects they use come from src/agent/sources/.

export {
  AGENT_CONFIG_DEFAULTS,
  type AgentConfig,
  ConfigError,
  type HostDeviceGroupConfig,
  type HubPodPolicy,
  loadAgentConfig,
} from "./agent-config.ts";
export { agentFlagList } from "./agent-flags.ts";
