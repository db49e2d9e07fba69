// Value checks for a decoded Pod, with the rules and messages of the API server's
// pkg/apis/core/validation for the fields fleetlet supports.

import { validateAffinity } from "./affinity.ts";
import {
  duplicate,
  type FieldError,
  FieldPath,
  invalid,
  required,
  tooMany,
} from "./field-error.ts";
import {
  isDNS1123Label,
  isDNS1123Subdomain,
  isQualifiedName,
  isValidIP,
  isValidLabelValue,
} from "./names.ts";
import type { Container, ObjectMeta, PodDNSConfig, PodSpec } from "./types.ts";
import { type ContainerContext, validateContainer, validateId } from "./validate-container.ts";
import { validateTolerations } from "./validate-tolerations.ts";
import { validateVolumes } from "./validate-volumes.ts";

const DEFAULT_GRACE_PERIOD_SECONDS = 30;
const MAX_NAMESERVERS = 3;
const MAX_SEARCHES = 32;
const MAX_ANNOTATIONS_BYTES = 256 * 1024;

/** All value errors of a decoded pod; empty when the pod is valid. */
export function validatePodValues(pod: { metadata: ObjectMeta; spec: PodSpec }): FieldError[] {
  return [
    ...validateObjectMeta(pod.metadata, FieldPath.root("metadata")),
    ...validatePodSpec(pod.spec, FieldPath.root("spec")),
  ];
}

export function validateObjectMeta(meta: ObjectMeta, path: FieldPath): FieldError[] {
  const errs: FieldError[] = [];
  if (meta.name === "") errs.push(required(path.child("name"), "name or generateName is required"));
  else
    errs.push(
      ...isDNS1123Subdomain(meta.name).map((m) => invalid(path.child("name"), meta.name, m)),
    );
  if (meta.namespace !== undefined && meta.namespace !== "") {
    const ns = meta.namespace;
    errs.push(...isDNS1123Label(ns).map((m) => invalid(path.child("namespace"), ns, m)));
  }
  for (const [k, v] of Object.entries(meta.labels ?? {})) {
    const p = path.child("labels");
    errs.push(...isQualifiedName(k).map((m) => invalid(p, k, m)));
    errs.push(...isValidLabelValue(v).map((m) => invalid(p.key(k), v, m)));
  }
  let annotationBytes = 0;
  for (const [k, v] of Object.entries(meta.annotations ?? {})) {
    errs.push(
      ...isQualifiedName(k.toLowerCase()).map((m) => invalid(path.child("annotations"), k, m)),
    );
    annotationBytes += Buffer.byteLength(k) + Buffer.byteLength(v);
  }
  if (annotationBytes > MAX_ANNOTATIONS_BYTES) {
    const detail = `may not have more than ${MAX_ANNOTATIONS_BYTES} bytes`;
    errs.push({ type: "Invalid", field: String(path.child("annotations")), detail });
  }
  return errs;
}

export function validatePodSpec(spec: PodSpec, path: FieldPath): FieldError[] {
  const errs: FieldError[] = [];
  const volumes = validateVolumes(spec.volumes ?? [], path.child("volumes"), errs);
  const ctx: Omit<ContainerContext, "isInit"> = {
    volumes,
    hostNetwork: spec.hostNetwork === true,
    gracePeriodSeconds: spec.terminationGracePeriodSeconds ?? DEFAULT_GRACE_PERIOD_SECONDS,
  };
  if (spec.containers.length === 0) errs.push(required(path.child("containers")));
  const names = new Set<string>();
  const each = (list: Container[], field: string, isInit: boolean) => {
    list.forEach((c, i) => {
      const p = path.child(field).index(i);
      errs.push(...validateContainer(c, p, { ...ctx, isInit }));
      if (c.name !== "" && names.has(c.name)) errs.push(duplicate(p.child("name"), c.name));
      names.add(c.name);
    });
  };
  each(spec.initContainers ?? [], "initContainers", true);
  each(spec.containers, "containers", false);
  errs.push(...validateHostPorts(spec, path));
  errs.push(...validateSpecScalars(spec, path));
  errs.push(...validateDNS(spec, path));
  errs.push(...validateAffinity(spec.affinity, path.child("affinity")));
  errs.push(...validateTolerations(spec.tolerations ?? [], path.child("tolerations")));
  const sc = spec.securityContext ?? {};
  const scPath = path.child("securityContext");
  errs.push(...validateId(sc.runAsUser, scPath.child("runAsUser")));
  errs.push(...validateId(sc.runAsGroup, scPath.child("runAsGroup")));
  errs.push(...validateId(sc.fsGroup, scPath.child("fsGroup")));
  (sc.supplementalGroups ?? []).forEach((g, i) => {
    errs.push(...validateId(g, scPath.child("supplementalGroups").index(i)));
  });
  return errs;
}

function validateSpecScalars(spec: PodSpec, path: FieldPath): FieldError[] {
  const errs: FieldError[] = [];
  const grace = spec.terminationGracePeriodSeconds;
  if (grace !== undefined && grace < 0) {
    errs.push(
      invalid(
        path.child("terminationGracePeriodSeconds"),
        grace,
        "must be greater than or equal to 0",
      ),
    );
  }
  const deadline = spec.activeDeadlineSeconds;
  if (deadline !== undefined && (deadline < 1 || deadline > 2147483647)) {
    errs.push(
      invalid(
        path.child("activeDeadlineSeconds"),
        deadline,
        "must be between 1 and 2147483647, inclusive",
      ),
    );
  }
  for (const field of ["hostname", "subdomain"] as const) {
    const v = spec[field];
    if (v) errs.push(...isDNS1123Label(v).map((m) => invalid(path.child(field), v, m)));
  }
  const node = spec.nodeName;
  if (node)
    errs.push(...isDNS1123Subdomain(node).map((m) => invalid(path.child("nodeName"), node, m)));
  for (const [k, v] of Object.entries(spec.nodeSelector ?? {})) {
    const p = path.child("nodeSelector");
    errs.push(...isQualifiedName(k).map((m) => invalid(p, k, m)));
    errs.push(...isValidLabelValue(v).map((m) => invalid(p.key(k), v, m)));
  }
  return errs;
}

/** No two containers may claim the same host port for the same protocol and host IP. */
function validateHostPorts(spec: PodSpec, path: FieldPath): FieldError[] {
  const errs: FieldError[] = [];
  const seen = new Set<string>();
  const lists = [
    ["initContainers", spec.initContainers ?? []],
    ["containers", spec.containers],
  ] as const;
  for (const [field, list] of lists) {
    list.forEach((c, ci) => {
      (c.ports ?? []).forEach((port, pi) => {
        const hostPort = port.hostPort || (spec.hostNetwork ? port.containerPort : 0);
        if (!hostPort) return;
        const value = `${hostPort}/${port.protocol ?? "TCP"}`;
        const key = `${port.hostIP ?? ""} ${value}`;
        if (seen.has(key)) {
          errs.push(
            duplicate(
              path.child(field).index(ci).child("ports").index(pi).child("hostPort"),
              value,
            ),
          );
        }
        seen.add(key);
      });
    });
  }
  return errs;
}

function validateDNS(spec: PodSpec, path: FieldPath): FieldError[] {
  const errs: FieldError[] = [];
  if (spec.dnsPolicy === "None" && !spec.dnsConfig) {
    errs.push(
      required(path.child("dnsConfig"), "must provide `dnsConfig` when `dnsPolicy` is None"),
    );
  }
  const cfg: PodDNSConfig = spec.dnsConfig ?? {};
  const p = path.child("dnsConfig");
  const servers = cfg.nameservers ?? [];
  if (spec.dnsPolicy === "None" && spec.dnsConfig && servers.length === 0) {
    errs.push(
      required(
        p.child("nameservers"),
        "must provide at least one DNS nameserver when `dnsPolicy` is None",
      ),
    );
  }
  if (servers.length > MAX_NAMESERVERS)
    errs.push(tooMany(p.child("nameservers"), servers.length, MAX_NAMESERVERS));
  servers.forEach((ns, i) => {
    if (!isValidIP(ns))
      errs.push(invalid(p.child("nameservers").index(i), ns, "must be a valid IP address"));
  });
  const searches = cfg.searches ?? [];
  if (searches.length > MAX_SEARCHES)
    errs.push(tooMany(p.child("searches"), searches.length, MAX_SEARCHES));
  searches.forEach((s, i) => {
    const name = s.endsWith(".") ? s.slice(0, -1) : s;
    errs.push(...isDNS1123Subdomain(name).map((m) => invalid(p.child("searches").index(i), s, m)));
  });
  (cfg.options ?? []).forEach((o, i) => {
    if (o.name === "") errs.push(required(p.child("options").index(i).child("name")));
  });
  return errs;
}
