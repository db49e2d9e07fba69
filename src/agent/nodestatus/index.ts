// Node status: the Kubernetes-shaped Node this agent reports (locally and to the hub).
export {
  buildNode,
  CPU_MODEL_ANNOTATION,
  kibibytes,
  type NodeState,
  nodeCapacity,
  nodeChanged,
  nodeConditions,
  nodeLabels,
  PSI_ANNOTATION_PREFIX,
} from "./build.ts";
export {
  filesystemBytes,
  type GatherFactsInput,
  gatherNodeFacts,
  goArch,
  type NodeFacts,
  prettyName,
} from "./facts.ts";
export { createNodeStatusManager, type NodeStatusDeps, type NodeStatusManager } from "./manager.ts";
export { type AgentNodeStatusInput, createAgentNodeStatus } from "./setup.ts";
