// The pods the hub derives from a DaemonSet (docs/deploy.md, "The pods the hub sends"): one per
// device, named `<daemonset>-<node>`, with the template's labels plus the revision hash, an owner
// reference, and a uid fixed by the DaemonSet, the node and the template. Pure.
import { createHash } from "node:crypto";
import { type DaemonSet, type PodTemplateSpec, REVISION_HASH_LABEL } from "../../api/daemonset.ts";
import { DEFAULT_NAMESPACE } from "../../api/index.ts";
import type { OwnerReference, Pod } from "../../api/types.ts";
import { canonicalJSON } from "../../util/canonical.ts";

/** The hash naming a template's revision: 10 hex chars of SHA-256 over its canonical JSON. */
export function templateHash(template: PodTemplateSpec): string {
  return createHash("sha256").update(canonicalJSON(template)).digest("hex").slice(0, 10);
}

/** A UUID-shaped id from SHA-256 of `parts`. */
export function derivedUid(...parts: string[]): string {
  const h = createHash("sha256").update(parts.join("\u0000")).digest("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/** The uid of the DaemonSet's pod of template `hash` on `node`. */
function hubPodUid(dsUid: string, node: string, hash: string): string {
  return derivedUid(dsUid, node, hash);
}

/** `<daemonset>-<node>`, as the kubelet names a node's static pods. */
export function hubPodName(ds: DaemonSet, node: string): string {
  return `${ds.metadata.name}-${node}`;
}

/** The owner reference to `ds` of the objects it controls (its pods and revisions). */
export function controllerRef(ds: DaemonSet): OwnerReference {
  return {
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    name: ds.metadata.name,
    uid: ds.metadata.uid ?? "",
    controller: true,
  };
}

/** The DaemonSet's pod for `node` with the template of revision `hash`. */
export function podFor(ds: DaemonSet, template: PodTemplateSpec, hash: string, node: string): Pod {
  const uid = ds.metadata.uid ?? "";
  const annotations = template.metadata?.annotations;
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: hubPodName(ds, node),
      namespace: ds.metadata.namespace ?? DEFAULT_NAMESPACE,
      uid: hubPodUid(uid, node, hash),
      labels: { ...template.metadata?.labels, [REVISION_HASH_LABEL]: hash },
      ...(annotations !== undefined && { annotations }),
      ownerReferences: [{ ...controllerRef(ds), blockOwnerDeletion: true }],
    },
    spec: { ...template.spec, nodeName: node },
  };
}

/** The DaemonSet uid that owns `pod`, if a DaemonSet does. */
export function ownerDaemonSet(pod: Pod): string | undefined {
  return pod.metadata.ownerReferences?.find((r) => r.kind === "DaemonSet" && r.controller)?.uid;
}
