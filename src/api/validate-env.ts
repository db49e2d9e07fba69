// Value checks of a container's environment (env, envFrom) and of the downward API selectors
// that env and downwardAPI volumes share, with the API server's rules and messages.

import { type FieldError, type FieldPath, invalid, notSupported, required } from "./field-error.ts";
import { isConfigMapKey, isDNS1123Subdomain, isEnvVarName, isQualifiedName } from "./names.ts";
import { formatQuantity, tryParseQuantity } from "./quantity.ts";
import type { EnvFromSource, EnvVar, ObjectFieldSelector, ResourceFieldSelector } from "./types.ts";

/** fieldPaths an env variable may read. */
const ENV_FIELD_PATHS = [
  "metadata.name",
  "metadata.namespace",
  "metadata.uid",
  "metadata.labels",
  "metadata.annotations",
  "spec.nodeName",
  "spec.serviceAccountName",
  "status.hostIP",
  "status.hostIPs",
  "status.podIP",
  "status.podIPs",
];

/** fieldPaths a downwardAPI volume file may hold: a volume is written before the pod has an
 * IP, so only the pod's metadata. */
export const VOLUME_FIELD_PATHS = [
  "metadata.annotations",
  "metadata.labels",
  "metadata.name",
  "metadata.namespace",
  "metadata.uid",
];

const RESOURCE_FIELD_PATHS = [
  "limits.cpu",
  "limits.ephemeral-storage",
  "limits.memory",
  "requests.cpu",
  "requests.ephemeral-storage",
  "requests.memory",
];

const SUBSCRIPTED = /^(metadata\.[a-z]+)\['(.*)'\]$/;
const CPU_DIVISORS = ["1m", "1"];
const BYTE_DIVISORS = [
  ...["1", "1k", "1M", "1G", "1T", "1P", "1E"],
  ...["1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei"],
];

export function validateEnv(env: EnvVar[], path: FieldPath): FieldError[] {
  const errs: FieldError[] = [];
  env.forEach((e, i) => {
    const p = path.index(i);
    if (e.name === "") errs.push(required(p.child("name")));
    else errs.push(...isEnvVarName(e.name).map((m) => invalid(p.child("name"), e.name, m)));
    if (e.valueFrom) errs.push(...validateValueFrom(e, p.child("valueFrom")));
  });
  return errs;
}

function validateValueFrom(e: EnvVar, path: FieldPath): FieldError[] {
  const vf = e.valueFrom ?? {};
  const errs: FieldError[] = [];
  let sources = 0;
  if (vf.fieldRef) {
    sources++;
    errs.push(...validateFieldRef(vf.fieldRef, ENV_FIELD_PATHS, path.child("fieldRef")));
  }
  if (vf.resourceFieldRef) {
    sources++;
    errs.push(
      ...validateResourceFieldRef(vf.resourceFieldRef, path.child("resourceFieldRef"), false),
    );
  }
  for (const field of ["configMapKeyRef", "secretKeyRef"] as const) {
    const ref = vf[field];
    if (!ref) continue;
    sources++;
    const p = path.child(field);
    const name = ref.name ?? "";
    errs.push(...isDNS1123Subdomain(name).map((m) => invalid(p.child("name"), name, m)));
    if (ref.key === "") errs.push(required(p.child("key")));
    else errs.push(...isConfigMapKey(ref.key).map((m) => invalid(p.child("key"), ref.key, m)));
  }
  if (sources === 0) {
    const detail =
      "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`";
    errs.push(invalid(path, "", detail));
  } else if (e.value !== undefined && e.value !== "") {
    errs.push(invalid(path, "", "may not be specified when `value` is not empty"));
  } else if (sources > 1) {
    errs.push(invalid(path, "", "may not have more than one field specified at a time"));
  }
  return errs;
}

export function validateEnvFrom(list: EnvFromSource[], path: FieldPath): FieldError[] {
  const errs: FieldError[] = [];
  list.forEach((e, i) => {
    const p = path.index(i);
    if (e.prefix)
      errs.push(...isEnvVarName(e.prefix).map((m) => invalid(p.child("prefix"), e.prefix, m)));
    let sources = 0;
    for (const field of ["configMapRef", "secretRef"] as const) {
      const ref = e[field];
      if (!ref) continue;
      sources++;
      const name = ref.name ?? "";
      const np = p.child(field).child("name");
      if (name === "") errs.push(required(np));
      else errs.push(...isDNS1123Subdomain(name).map((m) => invalid(np, name, m)));
    }
    if (sources === 0)
      errs.push(invalid(path, "", "must specify one of: `configMapRef` or `secretRef`"));
    else if (sources > 1)
      errs.push(invalid(path, "", "may not have more than one field specified at a time"));
  });
  return errs;
}

/** A fieldRef of env (`allowed` = ENV_FIELD_PATHS) or of a volume file (VOLUME_FIELD_PATHS). */
export function validateFieldRef(
  ref: ObjectFieldSelector,
  allowed: readonly string[],
  path: FieldPath,
): FieldError[] {
  if (ref.apiVersion !== undefined && ref.apiVersion !== "" && ref.apiVersion !== "v1") {
    return [notSupported(path.child("apiVersion"), ref.apiVersion, ["v1"])];
  }
  if (ref.fieldPath === "") return [required(path.child("fieldPath"))];
  const sub = SUBSCRIPTED.exec(ref.fieldPath);
  if (sub) {
    const [, field = "", key = ""] = sub;
    if (field === "metadata.annotations")
      return isQualifiedName(key.toLowerCase()).map((m) => invalid(path, key, m));
    if (field === "metadata.labels") return isQualifiedName(key).map((m) => invalid(path, key, m));
    return [invalid(path, field, "does not support subscript")];
  }
  if (!allowed.includes(ref.fieldPath))
    return [notSupported(path.child("fieldPath"), ref.fieldPath, allowed)];
  return [];
}

/** A resourceFieldRef; in a volume the container must be named. */
export function validateResourceFieldRef(
  ref: ResourceFieldSelector,
  path: FieldPath,
  volume: boolean,
): FieldError[] {
  if (volume && !ref.containerName) return [required(path.child("containerName"))];
  if (ref.resource === "") return [required(path.child("resource"))];
  if (!RESOURCE_FIELD_PATHS.includes(ref.resource))
    return [notSupported(path.child("resource"), ref.resource, RESOURCE_FIELD_PATHS)];
  if (ref.divisor === undefined) return [];
  const q = tryParseQuantity(ref.divisor);
  const canonical = q ? formatQuantity(q) : ref.divisor;
  if (canonical === "0") return [];
  const dp = path.child("divisor");
  if (ref.resource.endsWith(".cpu")) {
    if (CPU_DIVISORS.includes(canonical)) return [];
    return [
      invalid(
        dp,
        ref.resource,
        "only divisor's values 1m and 1 are supported with the cpu resource",
      ),
    ];
  }
  if (BYTE_DIVISORS.includes(canonical)) return [];
  const what = ref.resource.endsWith(".memory")
    ? "the memory resource"
    : "the local ephemeral storage resource";
  return [
    invalid(
      dp,
      ref.resource,
      `only divisor's values ${BYTE_DIVISORS.join(", ")} are supported with ${what}`,
    ),
  ];
}
