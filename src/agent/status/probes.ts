// Sets `started` and `ready` of container statuses from probe results, with kubelet's prober
// rules: only a running container can be started or ready; without a startup probe a running
// container is started; without a readiness probe a started container is ready; with a probe,
// only a recorded success counts. A regular init container is ready once it exited with 0.

import { isSidecar } from "../../api/containers.ts";
import type { Container, ContainerStatus, Pod } from "../../api/types.ts";

/** The latest result of one probe kind for a container, by CRI container ID (no scheme);
 * undefined when the probe has not produced a result yet. */
export type ProbeResults = (containerId: string) => boolean | undefined;

export interface ProbeInputs {
  readiness?: ProbeResults;
  startup?: ProbeResults;
}

/** Mutates `init` and `app` (built by convertContainerStatuses for `pod`). */
export function applyProbeResults(
  pod: Pod,
  init: ContainerStatus[],
  app: ContainerStatus[],
  probes: ProbeInputs,
): void {
  const specs = new Map<string, Container>();
  for (const c of [...(pod.spec.initContainers ?? []), ...pod.spec.containers]) {
    specs.set(c.name, c);
  }
  for (const s of app) setProbeState(s, specs.get(s.name), probes);
  for (const s of init) {
    const spec = specs.get(s.name);
    if (isSidecar(spec)) {
      setProbeState(s, spec, probes);
    } else {
      s.started = isStarted(s, spec, probes);
      s.ready = s.state.terminated !== undefined && s.state.terminated.exitCode === 0;
    }
  }
}

function setProbeState(s: ContainerStatus, spec: Container | undefined, probes: ProbeInputs) {
  s.started = isStarted(s, spec, probes);
  if (!s.started) {
    s.ready = false;
    return;
  }
  const id = rawId(s);
  s.ready = spec?.readinessProbe ? probes.readiness?.(id) === true : true;
}

function isStarted(s: ContainerStatus, spec: Container | undefined, probes: ProbeInputs) {
  if (!s.state.running) return false;
  return spec?.startupProbe ? probes.startup?.(rawId(s)) === true : true;
}

function rawId(s: ContainerStatus): string {
  const id = s.containerID ?? "";
  const at = id.indexOf("://");
  return at < 0 ? id : id.slice(at + 3);
}
