// Node status: the Kubernetes-shaped Node this agent reports (locally and to the hub).
export { buildNode, CPU_MODEL_ANNOTATION, type NodeState, nodeChanged } from "./build.ts";
export { goArch, type NodeFacts, prettyName } from "./facts.ts";
export { createNodeStatusManager } from "./manager.ts";
