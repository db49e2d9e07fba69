// Test builders: valid, defaulted Kubernetes objects with only the fields a test cares about.

import {
  applyContainerDefaults,
  applyPodDefaults,
  type Container,
  formatFieldError,
  type ObjectMeta,
  type Pod,
  type PodSpec,
  type PodStatus,
  validatePod,
} from "../../src/api/index.ts";

export interface PodOverrides {
  /** Shorthands for metadata.name / metadata.namespace / metadata.uid. */
  name?: string;
  namespace?: string;
  uid?: string;
  labels?: Record<string, string>;
  /** Shorthand for spec.containers (each is defaulted). */
  containers?: Container[];
  initContainers?: Container[];
  metadata?: Partial<ObjectMeta>;
  spec?: Partial<PodSpec>;
  status?: PodStatus;
}

/**
 * A valid pod after API defaulting: by default "web" in "default" with one container "app"
 * running "busybox:1.36". The uid is derived from namespace and name, so the same overrides
 * always build the same pod.
 */
export function makePod(o: PodOverrides = {}): Pod {
  const name = o.name ?? o.metadata?.name ?? "web";
  const namespace = o.namespace ?? o.metadata?.namespace ?? "default";
  const metadata: ObjectMeta = {
    uid: o.uid ?? `uid-${namespace}-${name}`,
    creationTimestamp: "2024-01-01T00:00:00Z",
    ...o.metadata,
    name,
    namespace,
  };
  if (o.labels) metadata.labels = o.labels;
  const spec: PodSpec = {
    nodeName: "node1",
    ...o.spec,
    containers: o.containers ?? o.spec?.containers ?? [makeContainer()],
  };
  const init = o.initContainers ?? o.spec?.initContainers;
  if (init) spec.initContainers = init;
  const pod: Pod = { apiVersion: "v1", kind: "Pod", metadata, spec };
  if (o.status) pod.status = o.status;
  return applyPodDefaults(pod);
}

/** A valid defaulted container, by default "app" running "busybox:1.36". */
export function makeContainer(o: Partial<Container> = {}): Container {
  return applyContainerDefaults(
    { name: "app", image: "busybox:1.36", ...o },
    { hostNetwork: false },
  );
}

/** A manifest as a user would write it (no defaults), for validation tests. */
export function makeManifest(
  spec: Record<string, unknown> = {},
  metadata: Record<string, unknown> = {},
) {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "web", ...metadata },
    spec: { containers: [{ name: "app", image: "busybox:1.36" }], ...spec },
  };
}

/** A manifest whose one container is "app" (busybox) with the fields of `c`. */
export function manifestWithContainer(
  c: Record<string, unknown>,
  spec: Record<string, unknown> = {},
) {
  return makeManifest({ containers: [{ name: "app", image: "busybox:1.36", ...c }], ...spec });
}

/** The validation errors of a manifest as kubectl prints them (none: []). */
export function manifestErrors(obj: unknown): string[] {
  const r = validatePod(obj);
  return r.ok ? [] : r.errors.map(formatFieldError);
}
