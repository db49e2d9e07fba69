// Value checks for one container, after decoding (types are already right).

import { extendedResourceProblems, isExtendedResourceName } from "./extended-resources.ts";
import {
  duplicate,
  type FieldError,
  type FieldPath,
  forbidden,
  invalid,
  notFound,
  required,
} from "./field-error.ts";
import {
  isDNS1123Label,
  isQualifiedName,
  isValidIP,
  isValidPortName,
  isValidPortNum,
  PORT_RANGE_MSG,
} from "./names.ts";
import { compareQuantity, type Quantity, quantitySign, tryParseQuantity } from "./quantity.ts";
import type { Container, ContainerPort, ResourceRequirements, SecurityContext } from "./types.ts";
import { validateEnv, validateEnvFrom } from "./validate-env.ts";
import { validateLifecycleHandler, validateProbe } from "./validate-handlers.ts";
import { validateLocalDescendingPath } from "./validate-volumes.ts";

/** What a container's checks need to know about its pod. */
export interface ContainerContext {
  /** Names of the pod's volumes. */
  volumes: ReadonlySet<string>;
  hostNetwork: boolean;
  /** The pod's terminationGracePeriodSeconds after defaulting. */
  gracePeriodSeconds: number;
  isInit: boolean;
}

const MAX_ID = 2147483647;
const QUANTITY_MSG =
  "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
const standardResources = new Set(["cpu", "memory", "ephemeral-storage"]);
export function validateContainer(
  c: Container,
  path: FieldPath,
  ctx: ContainerContext,
): FieldError[] {
  const errs: FieldError[] = [];
  if (c.name === "") errs.push(required(path.child("name")));
  else errs.push(...isDNS1123Label(c.name).map((m) => invalid(path.child("name"), c.name, m)));
  if (c.image === "") errs.push(required(path.child("image")));
  else if (c.image.trim() !== c.image) {
    errs.push(
      invalid(path.child("image"), c.image, "must not have leading or trailing whitespace"),
    );
  }
  const sidecar = ctx.isInit && c.restartPolicy === "Always";
  if (!ctx.isInit && c.restartPolicy !== undefined) {
    errs.push(forbidden(path.child("restartPolicy"), "may not be set for non-init containers"));
  }
  errs.push(...validatePorts(c.ports ?? [], path.child("ports"), ctx.hostNetwork));
  errs.push(...validateEnv(c.env ?? [], path.child("env")));
  errs.push(...validateEnvFrom(c.envFrom ?? [], path.child("envFrom")));
  errs.push(...validateResources(c.resources ?? {}, path.child("resources")));
  errs.push(...validateVolumeMounts(c, path.child("volumeMounts"), ctx.volumes));
  errs.push(...validateSecurityContext(c.securityContext ?? {}, path.child("securityContext")));
  for (const [field, kind] of [
    ["livenessProbe", "liveness"],
    ["readinessProbe", "readiness"],
    ["startupProbe", "startup"],
  ] as const) {
    const probe = c[field];
    if (!probe) continue;
    if (ctx.isInit && !sidecar) {
      errs.push(
        forbidden(
          path.child(field),
          "may not be set for init containers without restartPolicy=Always",
        ),
      );
    } else errs.push(...validateProbe(probe, kind, path.child(field)));
  }
  for (const hook of ["postStart", "preStop"] as const) {
    const h = c.lifecycle?.[hook];
    const p = path.child("lifecycle").child(hook);
    if (h && ctx.isInit && !sidecar) {
      errs.push(forbidden(p, "may not be set for init containers without restartPolicy=Always"));
    } else if (h) errs.push(...validateLifecycleHandler(h, ctx.gracePeriodSeconds, p));
  }
  return errs;
}

function validatePorts(
  ports: ContainerPort[],
  path: FieldPath,
  hostNetwork: boolean,
): FieldError[] {
  const errs: FieldError[] = [];
  const names = new Set<string>();
  ports.forEach((port, i) => {
    const p = path.index(i);
    if (port.name !== undefined && port.name !== "") {
      errs.push(...isValidPortName(port.name).map((m) => invalid(p.child("name"), port.name, m)));
      if (names.has(port.name)) errs.push(duplicate(p.child("name"), port.name));
      names.add(port.name);
    }
    if (port.containerPort === 0) errs.push(required(p.child("containerPort")));
    else if (!isValidPortNum(port.containerPort)) {
      errs.push(invalid(p.child("containerPort"), port.containerPort, PORT_RANGE_MSG));
    }
    const host = port.hostPort;
    if (host !== undefined && host !== 0 && !isValidPortNum(host)) {
      errs.push(invalid(p.child("hostPort"), host, PORT_RANGE_MSG));
    } else if (hostNetwork && host !== undefined && host !== 0 && host !== port.containerPort) {
      errs.push(
        invalid(p.child("hostPort"), host, "must match `containerPort` when `hostNetwork` is true"),
      );
    }
    if (port.hostIP !== undefined && port.hostIP !== "" && !isValidIP(port.hostIP)) {
      errs.push(invalid(p.child("hostIP"), port.hostIP, "must be a valid IP address"));
    }
  });
  return errs;
}

function validateResourceName(name: string, path: FieldPath): FieldError[] {
  if (standardResources.has(name) || name.startsWith("hugepages-")) return [];
  if (name.includes("/")) return isQualifiedName(name).map((m) => invalid(path, name, m));
  return [invalid(path, name, "must be a standard resource for containers")];
}

/** Parses each quantity of one list; returns the parsed ones and the errors. */
function parseResourceList(
  list: Record<string, string>,
  path: FieldPath,
): { parsed: Map<string, Quantity>; errs: FieldError[] } {
  const parsed = new Map<string, Quantity>();
  const errs: FieldError[] = [];
  for (const [name, text] of Object.entries(list)) {
    const p = path.key(name);
    errs.push(...validateResourceName(name, p));
    const q = tryParseQuantity(text);
    if (!q) errs.push(invalid(p, text, QUANTITY_MSG));
    else if (quantitySign(q) < 0) errs.push(invalid(p, text, "must be greater than or equal to 0"));
    else parsed.set(name, q);
  }
  return { parsed, errs };
}

/** Quantities parse and are non-negative; a request never exceeds its limit. */
function validateResources(res: ResourceRequirements, path: FieldPath): FieldError[] {
  const limits = parseResourceList(res.limits ?? {}, path.child("limits"));
  const requests = parseResourceList(res.requests ?? {}, path.child("requests"));
  const errs = [...limits.errs, ...requests.errs];
  for (const name of new Set([...limits.parsed.keys(), ...requests.parsed.keys()])) {
    if (!isExtendedResourceName(name)) continue;
    for (const p of extendedResourceProblems(
      name,
      limits.parsed.get(name),
      requests.parsed.get(name),
    ))
      errs.push(invalid(path.child(p.on).key(name), p.value, p.message));
  }
  for (const [name, req] of requests.parsed) {
    const lim = limits.parsed.get(name);
    if (lim && !isExtendedResourceName(name) && compareQuantity(req, lim) > 0) {
      const detail = `must be less than or equal to ${name} limit of ${lim.text}`;
      errs.push(invalid(path.child("requests").key(name), req.text, detail));
    }
  }
  return errs;
}

function validateVolumeMounts(
  c: Container,
  path: FieldPath,
  volumes: ReadonlySet<string>,
): FieldError[] {
  const errs: FieldError[] = [];
  const mountPaths = new Set<string>();
  (c.volumeMounts ?? []).forEach((m, i) => {
    const p = path.index(i);
    if (m.name === "") errs.push(required(p.child("name")));
    else if (!volumes.has(m.name)) errs.push(notFound(p.child("name"), m.name));
    if (m.mountPath === "") errs.push(required(p.child("mountPath")));
    else if (mountPaths.has(m.mountPath))
      errs.push(invalid(p.child("mountPath"), m.mountPath, "must be unique"));
    mountPaths.add(m.mountPath);
    if (m.subPath) errs.push(...validateLocalDescendingPath(m.subPath, p.child("subPath")));
    if (m.subPath && m.subPathExpr) {
      const detail = "subPathExpr and subPath are mutually exclusive";
      errs.push(invalid(p.child("subPathExpr"), m.subPathExpr, detail));
    }
    if (m.subPathExpr)
      errs.push(...validateLocalDescendingPath(m.subPathExpr, p.child("subPathExpr")));
  });
  return errs;
}

export function validateId(value: number | undefined, path: FieldPath): FieldError[] {
  if (value === undefined || (value >= 0 && value <= MAX_ID)) return [];
  return [invalid(path, value, `must be between 0 and ${MAX_ID}, inclusive`)];
}

function validateSecurityContext(sc: SecurityContext, path: FieldPath): FieldError[] {
  const errs = [
    ...validateId(sc.runAsUser, path.child("runAsUser")),
    ...validateId(sc.runAsGroup, path.child("runAsGroup")),
  ];
  if (sc.privileged === true && sc.allowPrivilegeEscalation === false) {
    const detail = "cannot set `allowPrivilegeEscalation` to false and `privileged` to true";
    errs.push(invalid(path.child("allowPrivilegeEscalation"), false, detail));
  }
  if (sc.runAsNonRoot === true && sc.runAsUser === 0) {
    errs.push(invalid(path.child("runAsUser"), 0, "must be non-zero when `runAsNonRoot` is true"));
  }
  return errs;
}
