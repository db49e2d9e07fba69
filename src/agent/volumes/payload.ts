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
export interface FileProjection {
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

function configMapFiles(
  cm: ConfigMap,
  items: KeyToPath[] | undefined,
  mode: number,
  optional: boolean,
  files: Payload,
): string | undefined {
  const value = (key: string): Buffer | undefined => {
    const text = cm.data?.[key];
    if (text !== undefined) return Buffer.from(text);
    const b64 = cm.binaryData?.[key];
    return b64 === undefined ? undefined : Buffer.from(b64, "base64");
  };
  if (!items || items.length === 0) {
    for (const key of [...Object.keys(cm.data ?? {}), ...Object.keys(cm.binaryData ?? {})])
      files.set(key, { data: value(key) as Buffer, mode });
    return undefined;
  }
  for (const item of items) {
    const data = value(item.key);
    if (data === undefined) {
      if (optional) continue;
      return `configmap references non-existent config key: ${item.key}`;
    }
    files.set(item.path, { data, mode: item.mode ?? mode });
  }
  return undefined;
}

function secretFiles(
  secret: Secret,
  items: KeyToPath[] | undefined,
  mode: number,
  optional: boolean,
  files: Payload,
): string | undefined {
  const data = secret.data ?? {};
  if (!items || items.length === 0) {
    for (const [key, b64] of Object.entries(data))
      files.set(key, { data: Buffer.from(b64, "base64"), mode });
    return undefined;
  }
  for (const item of items) {
    const b64 = data[item.key];
    if (b64 === undefined) {
      if (optional) continue;
      return `references non-existent secret key: ${item.key}`;
    }
    files.set(item.path, { data: Buffer.from(b64, "base64"), mode: item.mode ?? mode });
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

function lookupConfigMap(
  ctx: PayloadContext,
  ns: string,
  name: string,
  optional: boolean,
): ConfigMap | string {
  const cm = ctx.objects.configMap(ns, name);
  if (cm) return cm;
  if (optional) return { apiVersion: "v1", kind: "ConfigMap", metadata: { name, namespace: ns } };
  return `configmap ${JSON.stringify(name)} not found`;
}

function lookupSecret(
  ctx: PayloadContext,
  ns: string,
  name: string,
  optional: boolean,
): Secret | string {
  const s = ctx.objects.secret(ns, name);
  if (s) return s;
  if (optional) return { apiVersion: "v1", kind: "Secret", metadata: { name, namespace: ns } };
  return `secret ${JSON.stringify(name)} not found`;
}

/** The files of a configMap, secret, downwardAPI or projected volume. */
export function volumePayload(pod: Pod, v: Volume, ctx: PayloadContext): PayloadResult {
  const ns = pod.metadata.namespace ?? "default";
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
  if (v.configMap) {
    const src = v.configMap;
    const optional = src.optional === true;
    const cm = lookupConfigMap(ctx, ns, src.name ?? "", optional);
    const mode = src.defaultMode ?? DEFAULT_VOLUME_FILE_MODE;
    push(typeof cm === "string" ? cm : configMapFiles(cm, src.items, mode, optional, files));
  } else if (v.secret) {
    const src = v.secret;
    const optional = src.optional === true;
    const s = lookupSecret(ctx, ns, src.secretName ?? "", optional);
    const mode = src.defaultMode ?? DEFAULT_VOLUME_FILE_MODE;
    push(typeof s === "string" ? s : secretFiles(s, src.items, mode, optional, files));
  } else if (v.downwardAPI) {
    const mode = v.downwardAPI.defaultMode ?? DEFAULT_VOLUME_FILE_MODE;
    errors.push(...downwardFiles(pod, v.downwardAPI.items, mode, ctx, files));
  } else if (v.projected) {
    errors.push(...projectedFiles(pod, v, ctx, files));
  }
  return done();
}

function projectedFiles(pod: Pod, v: Volume, ctx: PayloadContext, files: Payload): string[] {
  const ns = pod.metadata.namespace ?? "default";
  const mode = v.projected?.defaultMode ?? DEFAULT_VOLUME_FILE_MODE;
  const errors: string[] = [];
  for (const source of v.projected?.sources ?? []) {
    if (source.configMap) {
      const optional = source.configMap.optional === true;
      const cm = lookupConfigMap(ctx, ns, source.configMap.name ?? "", optional);
      const e =
        typeof cm === "string"
          ? cm
          : configMapFiles(cm, source.configMap.items, mode, optional, files);
      if (e !== undefined) errors.push(e);
    } else if (source.secret) {
      const optional = source.secret.optional === true;
      const s = lookupSecret(ctx, ns, source.secret.name ?? "", optional);
      const e =
        typeof s === "string" ? s : secretFiles(s, source.secret.items, mode, optional, files);
      if (e !== undefined) errors.push(e);
    } else if (source.downwardAPI) {
      errors.push(...downwardFiles(pod, source.downwardAPI.items, mode, ctx, files));
    } else {
      errors.push("projected volume source is not supported");
    }
  }
  return errors;
}
