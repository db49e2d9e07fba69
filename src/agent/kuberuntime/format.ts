// Small formatting helpers shared by the runtime manager, with kubelet's wording.

import type { Container, Pod } from "../../api/types.ts";

/** kubelet's format.Pod: "name_namespace(uid)". */
export function formatPod(pod: Pod): string {
  return `${pod.metadata.name}_${pod.metadata.namespace ?? "default"}(${pod.metadata.uid ?? ""})`;
}

/** Go's time.Duration.String() for whole seconds: "10s", "1m20s", "5m0s". */
export { formatGoDuration as goDuration } from "../status/reasons.ts";

/** The container's spec entry and event field path ("spec.initContainers{init}"). */
export interface ContainerRef {
  container: Container;
  isInit: boolean;
  fieldPath: string;
}

export function findContainerSpec(pod: Pod, name: string): ContainerRef | undefined {
  const app = pod.spec.containers.find((c) => c.name === name);
  if (app) return { container: app, isInit: false, fieldPath: `spec.containers{${name}}` };
  const init = pod.spec.initContainers?.find((c) => c.name === name);
  if (init) return { container: init, isInit: true, fieldPath: `spec.initContainers{${name}}` };
  return undefined;
}

export function fieldPathOf(name: string, isInit: boolean): string {
  return isInit ? `spec.initContainers{${name}}` : `spec.containers{${name}}`;
}

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
