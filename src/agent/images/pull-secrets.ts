// A pod's imagePullSecrets as registry credentials: each named Secret of type
// kubernetes.io/dockerconfigjson (key .dockerconfigjson) or the older kubernetes.io/dockercfg
// (key .dockercfg, the "auths" map alone) from the object store. Secrets of other types hold no
// credentials; missing ones are named so that the pod's events say so.

import {
  DOCKER_CONFIG_JSON_KEY,
  DOCKERCFG_KEY,
  type Pod,
  SECRET_TYPE_DOCKER_CONFIG_JSON,
  SECRET_TYPE_DOCKERCFG,
  type Secret,
} from "../../api/index.ts";
import type { AuthConfig } from "../../cri/index.ts";
import { findCredential, parseDockerConfig, type RegistryCredential } from "./credentials.ts";
import type { ImageReference } from "./reference.ts";

export interface PodPullCredentials {
  /** In the order of the pod's imagePullSecrets. */
  credentials: RegistryCredential[];
  /** Names of the secrets that could not be used. */
  missing: string[];
}

function secretCredentials(secret: Secret, source: string): RegistryCredential[] {
  const value = (key: string) => {
    const b64 = secret.data?.[key];
    return b64 === undefined ? undefined : Buffer.from(b64, "base64").toString("utf8");
  };
  if (secret.type === SECRET_TYPE_DOCKER_CONFIG_JSON) {
    const text = value(DOCKER_CONFIG_JSON_KEY);
    return text === undefined ? [] : parseDockerConfig(text, source);
  }
  if (secret.type === SECRET_TYPE_DOCKERCFG) {
    const text = value(DOCKERCFG_KEY);
    if (text === undefined) return [];
    return parseDockerConfig(`{"auths":${text}}`, source);
  }
  return [];
}

/** The credentials of `pod`'s imagePullSecrets found by `secret`. */
export function podPullCredentials(
  pod: Pod,
  secret: (namespace: string, name: string) => Secret | undefined,
): PodPullCredentials {
  const ns = pod.metadata.namespace ?? "default";
  const out: PodPullCredentials = { credentials: [], missing: [] };
  for (const ref of pod.spec.imagePullSecrets ?? []) {
    if (!ref.name) continue;
    const s = secret(ns, ref.name);
    if (!s) {
      out.missing.push(ref.name);
      continue;
    }
    try {
      out.credentials.push(...secretCredentials(s, `secret ${ns}/${ref.name}`));
    } catch {
      out.missing.push(ref.name);
    }
  }
  return out;
}

/**
 * The credentials to try for an image, in the kubelet's order: the pod's pull secrets first,
 * then the node's docker config; `[null]` (an anonymous pull) when none matches.
 */
export function pullAuths(
  ref: ImageReference,
  podCredentials: readonly RegistryCredential[],
  nodeCredentials: readonly RegistryCredential[],
): (AuthConfig | null)[] {
  const found = [findCredential(podCredentials, ref), findCredential(nodeCredentials, ref)];
  const auths = found.filter((a): a is AuthConfig => a !== undefined);
  if (auths.length === 2 && JSON.stringify(auths[0]) === JSON.stringify(auths[1])) auths.pop();
  return auths.length > 0 ? auths : [null];
}

/** Errors of several attempts, as Go's aggregate prints them: one alone, several "[a, b]". */
export function aggregateErrors(errors: readonly Error[]): Error {
  if (errors.length === 1) return errors[0] as Error;
  return new Error(`[${errors.map((e) => e.message).join(", ")}]`);
}
