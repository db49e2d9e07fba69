// The API server's defaults (pkg/apis/core/v1/defaults.go) for the fields fleetlet supports.
// Every function returns a new object and leaves its input untouched. As in Go, where a zero
// value cannot be told from "unset", a 0 probe timing or threshold counts as unset.

import type {
  Container,
  ContainerPort,
  HTTPGetAction,
  Lifecycle,
  LifecycleHandler,
  Pod,
  Probe,
  PullPolicy,
  ResourceRequirements,
  Volume,
} from "./types.ts";

export const DEFAULT_NAMESPACE = "default";
const DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS = 30;
const DEFAULT_TERMINATION_MESSAGE_PATH = "/dev/termination-log";

/** Pod with every defaulted field set: namespace, restart and DNS policy, grace period, and
 * per container (init and app) pull policy, termination message, ports, probes, requests. */
export function applyPodDefaults(pod: Pod): Pod {
  const hostNetwork = pod.spec.hostNetwork === true;
  const spec = {
    ...pod.spec,
    restartPolicy: pod.spec.restartPolicy ?? "Always",
    terminationGracePeriodSeconds:
      pod.spec.terminationGracePeriodSeconds ?? DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS,
    dnsPolicy: pod.spec.dnsPolicy ?? "ClusterFirst",
    securityContext: pod.spec.securityContext ?? {},
    containers: pod.spec.containers.map((c) => applyContainerDefaults(c, { hostNetwork })),
  };
  if (pod.spec.initContainers) {
    spec.initContainers = pod.spec.initContainers.map((c) =>
      applyContainerDefaults(c, { hostNetwork }),
    );
  }
  if (spec.volumes) spec.volumes = spec.volumes.map(applyVolumeDefaults);
  const metadata = { ...pod.metadata, namespace: pod.metadata.namespace || DEFAULT_NAMESPACE };
  return { ...pod, metadata, spec };
}

/** Files of configMap, secret, downwardAPI and projected volumes default to mode 0644. */
export const DEFAULT_VOLUME_FILE_MODE = 0o644;

function applyVolumeDefaults(v: Volume): Volume {
  const mode = DEFAULT_VOLUME_FILE_MODE;
  if (v.hostPath) return { ...v, hostPath: { ...v.hostPath, type: v.hostPath.type ?? "" } };
  if (v.configMap)
    return { ...v, configMap: { ...v.configMap, defaultMode: v.configMap.defaultMode ?? mode } };
  if (v.secret) return { ...v, secret: { ...v.secret, defaultMode: v.secret.defaultMode ?? mode } };
  if (v.downwardAPI)
    return {
      ...v,
      downwardAPI: { ...v.downwardAPI, defaultMode: v.downwardAPI.defaultMode ?? mode },
    };
  if (v.projected)
    return { ...v, projected: { ...v.projected, defaultMode: v.projected.defaultMode ?? mode } };
  return v;
}

/**
 * "Always" when the image has no digest and its tag is "latest" or absent, else
 * "IfNotPresent". A registry port ("host:5000/app") is not a tag.
 */
export function defaultPullPolicy(image: string): PullPolicy {
  if (image.includes("@")) return "IfNotPresent";
  const lastPart = image.slice(image.lastIndexOf("/") + 1);
  const colon = lastPart.lastIndexOf(":");
  const tag = colon < 0 ? "" : lastPart.slice(colon + 1);
  return tag === "" || tag === "latest" ? "Always" : "IfNotPresent";
}

export interface ContainerDefaultsOptions {
  /** With host networking an unset hostPort defaults to the containerPort. */
  hostNetwork: boolean;
}

export function applyContainerDefaults(c: Container, opts: ContainerDefaultsOptions): Container {
  const out: Container = {
    ...c,
    imagePullPolicy: c.imagePullPolicy ?? defaultPullPolicy(c.image),
    terminationMessagePath: c.terminationMessagePath || DEFAULT_TERMINATION_MESSAGE_PATH,
    terminationMessagePolicy: c.terminationMessagePolicy ?? "File",
  };
  if (c.ports) out.ports = c.ports.map((p) => defaultPort(p, opts.hostNetwork));
  if (c.env) {
    out.env = c.env.map((e) =>
      e.valueFrom?.fieldRef
        ? {
            ...e,
            valueFrom: { ...e.valueFrom, fieldRef: { apiVersion: "v1", ...e.valueFrom.fieldRef } },
          }
        : e,
    );
  }
  const resources = defaultResources(c.resources);
  if (resources) out.resources = resources;
  if (c.livenessProbe) out.livenessProbe = defaultProbe(c.livenessProbe);
  if (c.readinessProbe) out.readinessProbe = defaultProbe(c.readinessProbe);
  if (c.startupProbe) out.startupProbe = defaultProbe(c.startupProbe);
  if (c.lifecycle) out.lifecycle = defaultLifecycle(c.lifecycle);
  return out;
}

function defaultPort(p: ContainerPort, hostNetwork: boolean): ContainerPort {
  const out: ContainerPort = { ...p, protocol: p.protocol ?? "TCP" };
  if (hostNetwork && !p.hostPort) out.hostPort = p.containerPort;
  return out;
}

/** Each limit without a request becomes the request too. */
function defaultResources(r: ResourceRequirements | undefined): ResourceRequirements | undefined {
  if (!r?.limits) return r;
  return { ...r, requests: { ...r.limits, ...r.requests } };
}

function defaultHTTPGet(h: HTTPGetAction): HTTPGetAction {
  return { ...h, path: h.path || "/", scheme: h.scheme ?? "HTTP" };
}

function defaultProbe(p: Probe): Probe {
  const out: Probe = {
    ...p,
    timeoutSeconds: p.timeoutSeconds || 1,
    periodSeconds: p.periodSeconds || 10,
    successThreshold: p.successThreshold || 1,
    failureThreshold: p.failureThreshold || 3,
  };
  if (p.httpGet) out.httpGet = defaultHTTPGet(p.httpGet);
  return out;
}

function defaultHandler(h: LifecycleHandler): LifecycleHandler {
  return h.httpGet ? { ...h, httpGet: defaultHTTPGet(h.httpGet) } : h;
}

function defaultLifecycle(l: Lifecycle): Lifecycle {
  const out: Lifecycle = { ...l };
  if (l.postStart) out.postStart = defaultHandler(l.postStart);
  if (l.preStop) out.preStop = defaultHandler(l.preStop);
  return out;
}
