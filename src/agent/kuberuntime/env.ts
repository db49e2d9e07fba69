// A container's environment as kubelet builds it: variables in spec order; `value`s expand
// $(VAR) references to variables defined before them; fieldRef values come from the pod
// (downward API) and are taken literally. Command and args expand against the whole environment.
//
// Expansion rules (Kubernetes' expansion package): $(NAME) becomes NAME's value when NAME is
// defined, else stays as written; $$ is a literal $ (so $$(NAME) stays "$(NAME)"); any other $
// is kept.

import type { Container, EnvVar, Pod } from "../../api/types.ts";
import type { KeyValue } from "../../cri/index.ts";

export interface EnvContext {
  nodeName: string;
  /** The pod's primary IP ("" when not known yet). */
  podIP: string;
  podIPs: string[];
  hostIP: string;
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

function formatMap(m: Record<string, string> | undefined): string {
  return Object.keys(m ?? {})
    .sort()
    .map((k) => `${k}=${JSON.stringify(m?.[k] ?? "")}`)
    .join("\n");
}

const SUBSCRIPT = /^metadata\.(labels|annotations)\['(.+)'\]$/;

/** The value of a downward API fieldPath; throws ContainerConfigError for unsupported paths. */
export function fieldRefValue(pod: Pod, fieldPath: string, ctx: EnvContext): string {
  const sub = SUBSCRIPT.exec(fieldPath);
  if (sub) {
    const map = sub[1] === "labels" ? pod.metadata.labels : pod.metadata.annotations;
    return map?.[sub[2] as string] ?? "";
  }
  switch (fieldPath) {
    case "metadata.name":
      return pod.metadata.name;
    case "metadata.namespace":
      return pod.metadata.namespace ?? "default";
    case "metadata.uid":
      return pod.metadata.uid ?? "";
    case "metadata.labels":
      return formatMap(pod.metadata.labels);
    case "metadata.annotations":
      return formatMap(pod.metadata.annotations);
    case "spec.nodeName":
      return ctx.nodeName;
    case "spec.serviceAccountName":
      return "";
    case "status.hostIP":
      return ctx.hostIP;
    case "status.hostIPs":
      return ctx.hostIP;
    case "status.podIP":
      return ctx.podIP;
    case "status.podIPs":
      return ctx.podIPs.join(",");
    default:
      throw new ContainerConfigError(`unsupported fieldPath ${JSON.stringify(fieldPath)}`);
  }
}

function envValue(pod: Pod, e: EnvVar, env: Map<string, string>, ctx: EnvContext): string {
  const fieldPath = e.valueFrom?.fieldRef?.fieldPath;
  if (fieldPath !== undefined) {
    try {
      return fieldRefValue(pod, fieldPath, ctx);
    } catch (err) {
      throw new ContainerConfigError(
        `Cannot set environment variable ${JSON.stringify(e.name)}: ${(err as Error).message}`,
      );
    }
  }
  if (e.valueFrom) {
    throw new ContainerConfigError(
      `Cannot set environment variable ${JSON.stringify(e.name)}: unsupported valueFrom ${JSON.stringify(e.valueFrom)}`,
    );
  }
  return expand(e.value ?? "", (name) => env.get(name));
}

/** The environment of `container`, in spec order; a repeated name keeps its first place and
 * takes the last value. Throws ContainerConfigError. */
export function makeEnvironment(pod: Pod, container: Container, ctx: EnvContext): KeyValue[] {
  const env = new Map<string, string>();
  for (const e of container.env ?? []) env.set(e.name, envValue(pod, e, env, ctx));
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
