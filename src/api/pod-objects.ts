// The ConfigMaps and Secrets a pod reads, and the keys that name them among all objects: what
// the agent's object store and the hub (which sends each device only the objects its pods
// reference) both need. Pure.
import { DEFAULT_NAMESPACE } from "./defaults.ts";
import type { Pod } from "./types.ts";
import type { ConfigMap, Secret } from "./types-config.ts";

/** A ConfigMap or Secret, as the volume manager and env read them. */
export type ConfigObject = ConfigMap | Secret;

/** The key of an object among the objects of all sources: "Kind/namespace/name". */
export function objectKeyOf(kind: ConfigObject["kind"], namespace: string, name: string): string {
  return `${kind}/${namespace}/${name}`;
}

export function objectKey(o: ConfigObject): string {
  return objectKeyOf(o.kind, o.metadata.namespace ?? DEFAULT_NAMESPACE, o.metadata.name);
}

/** The keys of every ConfigMap and Secret `pod` reads: volumes (projected ones too), env,
 * envFrom and imagePullSecrets. */
export function objectsUsedBy(pod: Pod): Set<string> {
  const ns = pod.metadata.namespace ?? "default";
  const keys = new Set<string>();
  const cm = (name: string | undefined) => name && keys.add(objectKeyOf("ConfigMap", ns, name));
  const secret = (name: string | undefined) => name && keys.add(objectKeyOf("Secret", ns, name));
  for (const v of pod.spec.volumes ?? []) {
    cm(v.configMap?.name);
    secret(v.secret?.secretName);
    for (const s of v.projected?.sources ?? []) {
      cm(s.configMap?.name);
      secret(s.secret?.name);
    }
  }
  for (const c of [...(pod.spec.initContainers ?? []), ...pod.spec.containers]) {
    for (const e of c.env ?? []) {
      cm(e.valueFrom?.configMapKeyRef?.name);
      secret(e.valueFrom?.secretKeyRef?.name);
    }
    for (const e of c.envFrom ?? []) {
      cm(e.configMapRef?.name);
      secret(e.secretRef?.name);
    }
  }
  for (const ref of pod.spec.imagePullSecrets ?? []) secret(ref.name);
  return keys;
}
