// The files of configMap, secret, downwardAPI and projected volumes, as the kubelet's plugins
// make them (their MakePayload and CollectData): path → content and mode. Pure: the objects
// come from the lookup, the node's figures from the context. Errors carry the kubelet's
// messages, which the FailedMount event shows after `MountVolume.SetUp failed for volume "x" : `.

import {
  type ConfigMap,
  DEFAULT_VOLUME_FILE_MODE,
  type DownwardAPIVolumeFile,
  type KeyToPath,
  type NodeAllocatable,
  type Pod,
  type PodFieldContext,
  podFieldValue,
  resourceFieldValue,
  type Secret,
  type Volume,
} from "../../api/index.ts";
import type { ObjectLookup } from "../sources/index.ts";

/** One file of a volume: its bytes and mode. */
interface FileProjection {
  data: Buffer;
  mode: number;
}

/** Relative path (no "..", not starting with "..") → file. */
export type Payload = Map<string, FileProjection>;

export type PayloadResult = { ok: true; files: Payload } | { ok: false; message: string };

export interface PayloadContext {
  objects: ObjectLookup;
  allocatable: NodeAllocatable;
  nodeName: string;
}

/** Several errors as Go's aggregate prints them: one alone, several as "[a, b]". */
function aggregate(messages: string[]): string {
  return messages.length === 1 ? (messages[0] as string) : `[${messages.join(", ")}]`;
}

/** A reference to a ConfigMap or Secret with the keys to project. */
interface ObjectSource {
  kind: "configMap" | "secret";
  name: string;
  items: KeyToPath[] | undefined;
  optional: boolean;
}

/** The object's values by key: a ConfigMap's data and binaryData, a Secret's data, decoded. */
function objectValues(o: ConfigMap | Secret): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  if (o.kind === "ConfigMap")
    for (const [k, v] of Object.entries(o.data ?? {})) out.set(k, Buffer.from(v));
  const b64 = o.kind === "ConfigMap" ? o.binaryData : o.data;
  for (const [k, v] of Object.entries(b64 ?? {})) out.set(k, Buffer.from(v, "base64"));
  return out;
}

/** Adds the source's files (every key, or its items) to `files`; the kubelet's message when
 * the object or a key is missing and the source is not optional. */
function objectFiles(
  pod: Pod,
  src: ObjectSource,
  mode: number,
  ctx: PayloadContext,
  files: Payload,
): string | undefined {
  const ns = pod.metadata.namespace ?? "default";
  const o =
    src.kind === "configMap"
      ? ctx.objects.configMap(ns, src.name)
      : ctx.objects.secret(ns, src.name);
  if (!o && !src.optional) return `${src.kind.toLowerCase()} ${JSON.stringify(src.name)} not found`;
  const values = o ? objectValues(o) : new Map<string, Buffer>();
  if (!src.items || src.items.length === 0) {
    for (const [key, data] of values) files.set(key, { data, mode });
    return undefined;
  }
  for (const item of src.items) {
    const data = values.get(item.key);
    if (data !== undefined) files.set(item.path, { data, mode: item.mode ?? mode });
    else if (!src.optional)
      return src.kind === "configMap"
        ? `configmap references non-existent config key: ${item.key}`
        : `references non-existent secret key: ${item.key}`;
  }
  return undefined;
}

/** The downward API files; each error is listed, the others are still written. */
function downwardFiles(
  pod: Pod,
  items: DownwardAPIVolumeFile[] | undefined,
  mode: number,
  ctx: PayloadContext,
  files: Payload,
): string[] {
  const errors: string[] = [];
  // A volume is written before the pod has an IP: only metadata (validation allows no more).
  const fields: PodFieldContext = { nodeName: ctx.nodeName, podIP: "", podIPs: [], hostIP: "" };
  for (const item of items ?? []) {
    let text = "";
    try {
      if (item.fieldRef) text = podFieldValue(pod, item.fieldRef.fieldPath, fields);
      else if (item.resourceFieldRef)
        text = resourceFieldValue(pod, undefined, item.resourceFieldRef, ctx.allocatable);
    } catch (err) {
      errors.push((err as Error).message);
    }
    const sorted = text.split("\n").sort().join("\n");
    files.set(normalize(item.path), { data: Buffer.from(sorted), mode: item.mode ?? mode });
  }
  return errors;
}

/** "a//b/./c" → "a/b/c", as Go's path.Clean for the relative paths validation allows. */
function normalize(p: string): string {
  return p
    .split("/")
    .filter((s) => s !== "" && s !== ".")
    .join("/");
}

/** The files of a configMap, secret, downwardAPI or projected volume. */
export function volumePayload(pod: Pod, v: Volume, ctx: PayloadContext): PayloadResult {
  const files: Payload = new Map();
  const errors: string[] = [];
  const done = (): PayloadResult => {
    for (const [path, f] of [...files]) {
      const clean = normalize(path);
      if (clean !== path) {
        files.delete(path);
        files.set(clean, f);
      }
    }
    return errors.length === 0 ? { ok: true, files } : { ok: false, message: aggregate(errors) };
  };
  const push = (e: string | undefined) => e !== undefined && errors.push(e);
  const mode = (m: number | undefined) => m ?? DEFAULT_VOLUME_FILE_MODE;
  if (v.configMap) {
    const { name = "", items, optional = false, defaultMode } = v.configMap;
    push(
      objectFiles(pod, { kind: "configMap", name, items, optional }, mode(defaultMode), ctx, files),
    );
  } else if (v.secret) {
    const { secretName: name = "", items, optional = false, defaultMode } = v.secret;
    push(
      objectFiles(pod, { kind: "secret", name, items, optional }, mode(defaultMode), ctx, files),
    );
  } else if (v.downwardAPI) {
    errors.push(
      ...downwardFiles(pod, v.downwardAPI.items, mode(v.downwardAPI.defaultMode), ctx, files),
    );
  } else if (v.projected) {
    errors.push(...projectedFiles(pod, v, ctx, files));
  }
  return done();
}

function projectedFiles(pod: Pod, v: Volume, ctx: PayloadContext, files: Payload): string[] {
  const mode = v.projected?.defaultMode ?? DEFAULT_VOLUME_FILE_MODE;
  const errors: string[] = [];
  for (const source of v.projected?.sources ?? []) {
    const ref = source.configMap ?? source.secret;
    if (ref) {
      const kind = source.configMap ? "configMap" : "secret";
      const src = {
        kind,
        name: ref.name ?? "",
        items: ref.items,
        optional: ref.optional === true,
      } as const;
      const e = objectFiles(pod, src, mode, ctx, files);
      if (e !== undefined) errors.push(e);
    } else if (source.downwardAPI) {
      errors.push(...downwardFiles(pod, source.downwardAPI.items, mode, ctx, files));
    } else {
      errors.push("projected volume source is not supported");
    }
  }
  return errors;
}
