// Turning the text of one manifest file into static pods, as the kubelet's file source does:
// decode (YAML; JSON is YAML), validate, give the pod its static identity, apply defaults.
// Besides Pods a file may hold the ConfigMaps and Secrets they use, validated as the API server
// does. A file is all or nothing: one bad document makes the whole file invalid.

import { createHash } from "node:crypto";
import {
  applyPodDefaults,
  DEFAULT_NAMESPACE,
  type FieldError,
  formatFieldError,
  isDNS1123Subdomain,
  type Pod,
  validateConfigMap,
  validatePod,
  validateSecret,
} from "../../api/index.ts";
import { type ConfigObject, objectKey, objectKeyOf } from "../../api/pod-objects.ts";
import { yamlDocuments } from "../../api/yaml.ts";
import { canonicalJSON } from "../../util/canonical.ts";

export const CONFIG_HASH_ANNOTATION = "kubernetes.io/config.hash";
export const CONFIG_SOURCE_ANNOTATION = "kubernetes.io/config.source";
export const CONFIG_SEEN_ANNOTATION = "kubernetes.io/config.seen";
export const CONFIG_MIRROR_ANNOTATION = "kubernetes.io/config.mirror";

/** Go's time.RFC3339Nano in UTC: trailing zeros of the fraction dropped, and the dot too. */
export function rfc3339Nano(ms: number): string {
  const iso = new Date(ms).toISOString();
  return iso.replace(/\.(\d*?)0*Z$/, (_, frac: string) => (frac ? `.${frac}Z` : "Z"));
}

export interface ManifestContext {
  /** The file's path, as listed (it is part of each pod's identity). */
  path: string;
  nodeName: string;
}

export type ParseManifestResult =
  | { ok: true; pods: Pod[]; objects: ConfigObject[] }
  | { ok: false; message: string };

export { type ConfigObject, objectKey, objectKeyOf };

/** "configmap \"default/cfg\"": how messages name an object (kind in lower case, as kubectl). */
export function describeObject(o: ConfigObject): string {
  return `${o.kind.toLowerCase()} ${JSON.stringify(`${o.metadata.namespace ?? DEFAULT_NAMESPACE}/${o.metadata.name}`)}`;
}

const KINDS = ["Pod", "ConfigMap", "Secret"];

/** Bounds of a message about a bad file, which is logged and becomes an event: values and
 * paths shown are cut, at most this many field errors are listed, and the line is cut. */
const MAX_SHOWN_VALUE = 120;
const MAX_LISTED_ERRORS = 10;
const MAX_MESSAGE = 2048;

/**
 * Parses every document of a manifest file into a static pod (empty documents are skipped).
 * The pods have their static identity (uid, name, namespace, node name, config.hash and
 * config.source annotations) and defaults; config.seen is left to the caller. On failure the
 * message is one line naming the file, the document (when the file has several), the pod and
 * the field.
 */
export function parseManifestFile(text: string, ctx: ManifestContext): ParseManifestResult {
  const docs = yamlDocuments(text);
  const many = docs.length > 1;
  const pods: Pod[] = [];
  const objects: ConfigObject[] = [];
  const names = new Map<string, number>();
  for (const [i, doc] of docs.entries()) {
    const where = `manifest ${ctx.path}${many ? ` (document ${i + 1})` : ""}`;
    if ("error" in doc) return fail(where, `invalid YAML: ${doc.error}`);
    if (doc.value === null || doc.value === undefined) continue;
    const decoded = decodeDocument(doc.value, ctx);
    if (!decoded.ok) return fail(where, decoded.message);
    const what = "pod" in decoded ? decoded.pod : decoded.object;
    const label =
      "pod" in decoded
        ? `pod ${JSON.stringify(`${what.metadata.namespace}/${what.metadata.name}`)}`
        : describeObject(decoded.object);
    const earlier = names.get(label);
    if (earlier !== undefined)
      return fail(where, `${label} is also defined in document ${earlier + 1}`);
    names.set(label, i);
    if ("pod" in decoded) pods.push(decoded.pod);
    else objects.push(decoded.object);
  }
  return { ok: true, pods, objects };
}

type DecodedDocument =
  | { ok: true; pod: Pod }
  | { ok: true; object: ConfigObject }
  | { ok: false; message: string };

/** One document by its kind: a Pod, a ConfigMap or a Secret. */
function decodeDocument(obj: unknown, ctx: ManifestContext): DecodedDocument {
  const kind = (obj as { kind?: unknown } | null)?.kind;
  if (typeof kind === "string" && kind !== "" && !KINDS.includes(kind)) {
    const supported = KINDS.map((k) => JSON.stringify(k)).join(", ");
    return {
      ok: false,
      message: `kind: Unsupported value: ${quote(kind)}: supported values: ${supported}`,
    };
  }
  if (kind !== "ConfigMap" && kind !== "Secret") return decodePod(obj, ctx);
  const result: { ok: true; object: ConfigObject } | { ok: false; errors: FieldError[] } =
    kind === "ConfigMap" ? validateConfigMap(obj) : validateSecret(obj);
  if (result.ok) return result;
  const rawName = (obj as { metadata?: { name?: unknown } }).metadata?.name;
  const label = typeof rawName === "string" ? `${kind.toLowerCase()} ${quote(rawName)}: ` : "";
  return { ok: false, message: label + listErrors(result.errors) };
}

/** One line, at most MAX_MESSAGE characters: line breaks (a map key may hold them) are escaped. */
function fail(where: string, message: string): ParseManifestResult {
  let line = `${where}: ${message}`.replace(/\r/g, "\\r").replace(/\n/g, "\\n");
  if (line.length > MAX_MESSAGE)
    line = `${line.slice(0, MAX_MESSAGE - 40)}... (${line.length} characters in all)`;
  return { ok: false, message: line };
}

/** A value quoted as in a field error, cut after MAX_SHOWN_VALUE characters. */
function quote(v: string): string {
  return JSON.stringify(cut(v));
}

function cut(v: string): string {
  return v.length <= MAX_SHOWN_VALUE
    ? v
    : `${v.slice(0, MAX_SHOWN_VALUE)}... (${v.length} characters)`;
}

/** The first MAX_LISTED_ERRORS field errors, their values and paths cut, and how many more. */
function listErrors(errors: readonly FieldError[]): string {
  const shown = errors.slice(0, MAX_LISTED_ERRORS).map((e) =>
    formatFieldError({
      ...e,
      field: cut(e.field),
      ...(typeof e.badValue === "string" ? { badValue: cut(e.badValue) } : {}),
    }),
  );
  const more = errors.length - shown.length;
  return shown.join("; ") + (more > 0 ? `; and ${more} more` : "");
}

function describeKind(obj: unknown): string {
  if (Array.isArray(obj)) return "a list";
  if (typeof obj !== "object" || obj === null) return `a ${typeof obj}`;
  return "an object";
}

/** Validates one decoded document and makes it a static pod of this node. */
function decodePod(
  obj: unknown,
  ctx: ManifestContext,
): { ok: true; pod: Pod } | { ok: false; message: string } {
  if (typeof obj !== "object" || obj === null || Array.isArray(obj)) {
    return { ok: false, message: `expected a Pod object, got ${describeKind(obj)}` };
  }
  const result = validatePod(obj);
  const rawName = (obj as { metadata?: { name?: unknown } }).metadata?.name;
  const podLabel = typeof rawName === "string" ? `pod ${quote(rawName)}: ` : "";
  if (!result.ok) {
    return { ok: false, message: podLabel + listErrors(result.errors) };
  }
  const pod = makeStaticPod(result.pod, ctx);
  const nameErrors = isDNS1123Subdomain(pod.metadata.name);
  if (nameErrors.length > 0) {
    const detail = `with the node name appended: ${nameErrors.join("; ")}`;
    return {
      ok: false,
      message: `${podLabel}metadata.name: Invalid value: ${quote(pod.metadata.name)}: ${detail}`,
    };
  }
  return { ok: true, pod };
}

/**
 * The uid of a static pod: md5 (hex) over the node name, the file path and the canonical JSON
 * of the decoded manifest before defaults, so it changes with any edit of the pod, with the
 * node and with the file, but not with an agent upgrade that changes defaults.
 */
function staticPodUID(decoded: Pod, ctx: ManifestContext): string {
  const hash = createHash("md5");
  hash.update(`host:${ctx.nodeName}\n`);
  hash.update(`file:${ctx.path}\n`);
  hash.update(canonicalJSON(decoded));
  return hash.digest("hex");
}

/** The static pod for a decoded manifest: identity as the kubelet gives it, then defaults. */
function makeStaticPod(decoded: Pod, ctx: ManifestContext): Pod {
  const uid = decoded.metadata.uid || staticPodUID(decoded, ctx);
  const pod = applyPodDefaults(decoded);
  const metadata = {
    ...pod.metadata,
    uid,
    name: `${decoded.metadata.name}-${ctx.nodeName.toLowerCase()}`,
    namespace: decoded.metadata.namespace || DEFAULT_NAMESPACE,
    annotations: {
      ...pod.metadata.annotations,
      [CONFIG_HASH_ANNOTATION]: uid,
      [CONFIG_SOURCE_ANNOTATION]: "file",
    },
  };
  return { ...pod, metadata, spec: { ...pod.spec, nodeName: ctx.nodeName } };
}
