// A container's environment as kubelet builds it: first every key of each envFrom ConfigMap or
// Secret (with its prefix; a key that is no valid variable name is skipped with the kubelet's
// InvalidEnvironmentVariableNames event), then `env` in spec order, overriding them. `value`s
// expand $(VAR) references to variables defined before them; fieldRef and resourceFieldRef
// values come from the pod (downward API), configMapKeyRef and secretKeyRef values from the
// object store, all taken literally. A missing object or key fails the container
// (CreateContainerConfigError) unless the reference is optional. Command and args expand
// against the whole environment.
//
// Expansion rules (Kubernetes' expansion package): $(NAME) becomes NAME's value when NAME is
// defined, else stays as written; $$ is a literal $ (so $$(NAME) stays "$(NAME)"); any other $
// is kept.

import {
  type ConfigMap,
  isEnvVarName,
  type NodeAllocatable,
  podFieldValue,
  resourceFieldValue,
  type Secret,
} from "../../api/index.ts";
import type { Container, EnvFromSource, EnvVar, Pod } from "../../api/types.ts";
import type { KeyValue } from "../../cri/index.ts";

/** The ConfigMaps and Secrets env reads (the object store). */
export interface EnvObjects {
  configMap(namespace: string, name: string): ConfigMap | undefined;
  secret(namespace: string, name: string): Secret | undefined;
}

export interface EnvContext {
  nodeName: string;
  /** The pod's primary IP ("" when not known yet). */
  podIP: string;
  podIPs: string[];
  hostIP: string;
  /** Absent: every configMapKeyRef, secretKeyRef and envFrom finds nothing. */
  objects?: EnvObjects;
  /** For resourceFieldRef of a container with no limit (absent: zeros). */
  allocatable?: NodeAllocatable;
  /** Records the kubelet's InvalidEnvironmentVariableNames warning. */
  onInvalidNames?: (message: string) => void;
}

/** A container whose config cannot be built (shown as CreateContainerConfigError). */
export class ContainerConfigError extends Error {
  override readonly name = "ContainerConfigError";
}

/** Expands $(VAR) references in `input` with `lookup` (undefined: leave the reference). */
export function expand(input: string, lookup: (name: string) => string | undefined): string {
  let out = "";
  let i = 0;
  while (i < input.length) {
    const ch = input[i];
    if (ch !== "$" || i + 1 >= input.length) {
      out += ch;
      i++;
      continue;
    }
    const next = input[i + 1];
    if (next === "$") {
      out += "$";
      i += 2;
    } else if (next === "(") {
      const close = input.indexOf(")", i + 2);
      if (close === -1) {
        out += "$(";
        i += 2;
        continue;
      }
      const name = input.slice(i + 2, close);
      out += lookup(name) ?? `$(${name})`;
      i = close + 1;
    } else {
      out += `$${next}`;
      i += 2;
    }
  }
  return out;
}

const NO_ALLOCATABLE: NodeAllocatable = { cpu: 0, memory: 0, ephemeralStorage: 0 };

/** An object's values as text by key (Secret values decoded), or undefined when it is missing. */
function objectData(
  kind: "configMap" | "secret",
  pod: Pod,
  name: string,
  ctx: EnvContext,
): Record<string, string> | undefined {
  const ns = pod.metadata.namespace ?? "default";
  if (kind === "configMap") {
    const cm = ctx.objects?.configMap(ns, name);
    return cm ? { ...cm.data } : undefined;
  }
  const secret = ctx.objects?.secret(ns, name);
  if (!secret) return undefined;
  const out: Record<string, string> = {};
  for (const [k, b64] of Object.entries(secret.data ?? {}))
    out[k] = Buffer.from(b64, "base64").toString("utf8");
  return out;
}

function notFound(kind: "configMap" | "secret", name: string): ContainerConfigError {
  return new ContainerConfigError(`${kind.toLowerCase()} ${JSON.stringify(name)} not found`);
}

function keyRefValue(pod: Pod, e: EnvVar, ctx: EnvContext): string | undefined {
  const vf = e.valueFrom ?? {};
  const kind = vf.configMapKeyRef ? "configMap" : "secret";
  const ref = vf.configMapKeyRef ?? vf.secretKeyRef;
  if (!ref) return undefined;
  const name = ref.name ?? "";
  const data = objectData(kind, pod, name, ctx);
  if (data === undefined) {
    if (ref.optional) return undefined;
    throw notFound(kind, name);
  }
  const value = data[ref.key];
  if (value === undefined && !ref.optional) {
    const what = kind === "configMap" ? "ConfigMap" : "Secret";
    throw new ContainerConfigError(
      `couldn't find key ${ref.key} in ${what} ${pod.metadata.namespace ?? "default"}/${name}`,
    );
  }
  return value;
}

/** The variable's value; undefined when an optional reference found nothing (no variable). */
function envValue(
  pod: Pod,
  c: Container,
  e: EnvVar,
  env: Map<string, string>,
  ctx: EnvContext,
): string | undefined {
  const vf = e.valueFrom;
  if (e.value || !vf) return expand(e.value ?? "", (name) => env.get(name));
  try {
    if (vf.fieldRef) return podFieldValue(pod, vf.fieldRef.fieldPath, ctx);
    if (vf.resourceFieldRef)
      return resourceFieldValue(pod, c, vf.resourceFieldRef, ctx.allocatable ?? NO_ALLOCATABLE);
  } catch (err) {
    throw new ContainerConfigError(
      `Cannot set environment variable ${JSON.stringify(e.name)}: ${(err as Error).message}`,
    );
  }
  if (vf.configMapKeyRef || vf.secretKeyRef) return keyRefValue(pod, e, ctx);
  throw new ContainerConfigError(
    `Cannot set environment variable ${JSON.stringify(e.name)}: unsupported valueFrom ${JSON.stringify(vf)}`,
  );
}

/** The variables of one envFrom source, into `env`. */
function addEnvFrom(pod: Pod, src: EnvFromSource, env: Map<string, string>, ctx: EnvContext): void {
  const kind = src.configMapRef ? "configMap" : "secret";
  const ref = src.configMapRef ?? src.secretRef;
  if (!ref) return;
  const name = ref.name ?? "";
  const data = objectData(kind, pod, name, ctx);
  if (data === undefined) {
    if (ref.optional) return;
    throw notFound(kind, name);
  }
  const invalid: string[] = [];
  for (const [key, value] of Object.entries(data).sort(([a], [b]) =>
    a < b ? -1 : a > b ? 1 : 0,
  )) {
    const full = `${src.prefix ?? ""}${key}`;
    if (isEnvVarName(full).length > 0) invalid.push(full);
    else env.set(full, value);
  }
  if (invalid.length > 0) {
    const what = kind === "configMap" ? "configMap" : "secret";
    ctx.onInvalidNames?.(
      `Keys [${invalid.sort().join(", ")}] from the EnvFrom ${what} ${pod.metadata.namespace ?? "default"}/${name} were skipped since they are considered invalid environment variable names.`,
    );
  }
}

/** The environment of `container`, in spec order; a repeated name keeps its first place and
 * takes the last value. Throws ContainerConfigError. */
export function makeEnvironment(pod: Pod, container: Container, ctx: EnvContext): KeyValue[] {
  const env = new Map<string, string>();
  for (const src of container.envFrom ?? []) addEnvFrom(pod, src, env, ctx);
  for (const e of container.env ?? []) {
    const value = envValue(pod, container, e, env, ctx);
    if (value !== undefined) env.set(e.name, value);
  }
  return [...env].map(([key, value]) => ({ key, value }));
}

/** Command and args with $(VAR) expanded against the container's environment. */
export function expandCommandAndArgs(
  container: Container,
  envs: KeyValue[],
): { command: string[]; args: string[] } {
  const map = new Map(envs.map((e) => [e.key, e.value]));
  const lookup = (name: string) => map.get(name);
  return {
    command: (container.command ?? []).map((s) => expand(s, lookup)),
    args: (container.args ?? []).map((s) => expand(s, lookup)),
  };
}
