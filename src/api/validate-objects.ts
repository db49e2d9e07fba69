// Decoding and validating ConfigMap and Secret documents as the API server does on create:
// keys are file names ([-._a-zA-Z0-9]+, never "." or starting with ".."), a key is in data or
// binaryData but not both, base64 values are strict (Go's standard encoding: padding required,
// only line breaks ignored), and the values together hold at most 1 MiB. A Secret's stringData
// is written into data (winning over it) and its type defaults to Opaque; the dockerconfigjson,
// dockercfg, basic-auth, ssh-auth and tls types need their keys. An update of an `immutable`
// object may not change its data (validateImmutableUpdate). Values of Secrets never appear in
// an error.

import {
  type FieldError,
  FieldPath,
  forbidden,
  invalid,
  required,
  tooLong,
} from "./field-error.ts";
import { isConfigMapKey } from "./names.ts";
import { decodeObject } from "./schema.ts";
import { configMapSchema, secretSchema } from "./schema-config.ts";
import {
  type ConfigMap,
  DOCKER_CONFIG_JSON_KEY,
  DOCKERCFG_KEY,
  SECRET_TYPE_DOCKER_CONFIG_JSON,
  SECRET_TYPE_DOCKERCFG,
  SECRET_TYPE_OPAQUE,
  type Secret,
} from "./types-config.ts";
import { validateObjectMeta } from "./validation.ts";

/** The most bytes the values of one ConfigMap or Secret may hold together. */
const MAX_OBJECT_DATA_BYTES = 1024 * 1024;
const REDACTED = "<secret contents redacted>";
const IMMUTABLE = "field is immutable when `immutable` is set";

export type ValidateResult<T> = { ok: true; object: T } | { ok: false; errors: FieldError[] };

const B64 = /^[A-Za-z0-9+/]$/;
const isNewline = (c: string | undefined) => c === "\n" || c === "\r";

/** Go's base64.StdEncoding: the decoded bytes, or the offset of the first bad input byte (as
 * Go reports it: "illegal base64 data at input byte N"). */
export function decodeBase64Strict(text: string): { bytes: Buffer } | { badByte: number } {
  let si = 0;
  for (;;) {
    let j = 0;
    while (j < 4) {
      if (si === text.length) {
        if (j === 0) return { bytes: Buffer.from(text.replace(/[\r\n]/g, ""), "base64") };
        return { badByte: si - j };
      }
      const c = text[si] as string;
      si++;
      if (B64.test(c)) j++;
      else if (isNewline(c)) continue;
      else if (c !== "=" || j < 2) return { badByte: si - 1 };
      else return padding(text, si, j);
    }
  }
}

/** After the first "=" of a quantum holding `j` characters: the rest must be padding. */
function padding(text: string, at: number, j: number): { bytes: Buffer } | { badByte: number } {
  let si = at;
  if (j === 2) {
    while (isNewline(text[si])) si++;
    if (si === text.length) return { badByte: text.length };
    if (text[si] !== "=") return { badByte: si - 1 };
    si++;
  }
  while (isNewline(text[si])) si++;
  if (si < text.length) return { badByte: si };
  return { bytes: Buffer.from(text.replace(/[\r\n]/g, ""), "base64") };
}

/** Two string maps hold the same keys and values (an absent map is an empty one). */
function sameMap(a: Record<string, string> | undefined, b: Record<string, string> | undefined) {
  const ka = Object.keys(a ?? {});
  return ka.length === Object.keys(b ?? {}).length && ka.every((k) => a?.[k] === b?.[k]);
}

function validateKeys(
  map: Record<string, string> | undefined,
  path: FieldPath,
  errs: FieldError[],
): void {
  for (const key of Object.keys(map ?? {})) {
    errs.push(...isConfigMapKey(key).map((m) => invalid(path.key(key), key, m)));
  }
}

/** Decodes each base64 value, reporting bad ones; returns the total of decoded bytes. */
function decodedBytes(
  map: Record<string, string> | undefined,
  path: FieldPath,
  errs: FieldError[],
): number {
  let total = 0;
  for (const [key, value] of Object.entries(map ?? {})) {
    const d = decodeBase64Strict(value);
    if ("badByte" in d)
      errs.push(invalid(path.key(key), REDACTED, `illegal base64 data at input byte ${d.badByte}`));
    else total += d.bytes.length;
  }
  return total;
}

/** Decodes and validates a parsed ConfigMap document; the namespace defaults to "default". */
export function validateConfigMap(obj: unknown): ValidateResult<ConfigMap> {
  const decoded = decodeObject(configMapSchema, obj);
  if (!decoded.ok) return decoded;
  const cm = decoded.value;
  const errs: FieldError[] = [];
  errs.push(...validateObjectMeta(cm.metadata, FieldPath.root("metadata")));
  const data = FieldPath.root("data");
  const binary = FieldPath.root("binaryData");
  validateKeys(cm.data, data, errs);
  validateKeys(cm.binaryData, binary, errs);
  for (const key of Object.keys(cm.data ?? {})) {
    if (cm.binaryData?.[key] !== undefined)
      errs.push(invalid(data.key(key), key, "duplicate of key present in binaryData"));
  }
  let total = decodedBytes(cm.binaryData, binary, errs);
  for (const v of Object.values(cm.data ?? {})) total += Buffer.byteLength(v);
  if (total > MAX_OBJECT_DATA_BYTES) errs.push(tooLong(data, MAX_OBJECT_DATA_BYTES));
  if (errs.length > 0) return { ok: false, errors: errs };
  const metadata = { ...cm.metadata, namespace: cm.metadata.namespace || "default" };
  return { ok: true, object: { ...cm, metadata } };
}

/** Decodes and validates a parsed Secret document: stringData goes into data (base64), the
 * type defaults to Opaque, the namespace to "default". */
export function validateSecret(obj: unknown): ValidateResult<Secret> {
  const decoded = decodeObject(secretSchema, obj);
  if (!decoded.ok) return decoded;
  const { stringData, ...secret } = decoded.value;
  const errs: FieldError[] = [];
  errs.push(...validateObjectMeta(secret.metadata, FieldPath.root("metadata")));
  const dataPath = FieldPath.root("data");
  validateKeys(secret.data, dataPath, errs);
  validateKeys(stringData, FieldPath.root("stringData"), errs);
  const data: Record<string, string> = { ...secret.data };
  for (const [k, v] of Object.entries(stringData ?? {}))
    data[k] = Buffer.from(v).toString("base64");
  const bytes = new Map<string, Buffer>();
  for (const [key, value] of Object.entries(data)) {
    const d = decodeBase64Strict(value);
    if ("badByte" in d)
      errs.push(
        invalid(dataPath.key(key), REDACTED, `illegal base64 data at input byte ${d.badByte}`),
      );
    else bytes.set(key, d.bytes);
  }
  let total = 0;
  for (const b of bytes.values()) total += b.length;
  if (total > MAX_OBJECT_DATA_BYTES) errs.push(tooLong(dataPath, MAX_OBJECT_DATA_BYTES));
  const type = secret.type || SECRET_TYPE_OPAQUE;
  errs.push(...validateSecretType(type, bytes, secret.metadata.annotations ?? {}));
  if (errs.length > 0) return { ok: false, errors: errs };
  const metadata = { ...secret.metadata, namespace: secret.metadata.namespace || "default" };
  const out: Secret = { ...secret, metadata, type };
  if (Object.keys(data).length > 0) out.data = data;
  else delete out.data;
  return { ok: true, object: out };
}

const SERVICE_ACCOUNT_NAME = "kubernetes.io/service-account.name";

/** The keys a Secret of a well-known type must hold. */
function validateSecretType(
  type: string,
  bytes: Map<string, Buffer>,
  annotations: Record<string, string>,
): FieldError[] {
  const path = FieldPath.root("data");
  const need = (...keys: string[]) =>
    keys.filter((k) => !bytes.has(k)).map((k) => required(path.key(k)));
  const json = (key: string): FieldError[] => {
    const missing = need(key);
    if (missing.length > 0) return missing;
    try {
      const v = JSON.parse((bytes.get(key) as Buffer).toString("utf8"));
      if (typeof v !== "object" || v === null || Array.isArray(v))
        throw new Error("not a JSON object");
      return [];
    } catch (err) {
      return [invalid(path.key(key), REDACTED, (err as Error).message)];
    }
  };
  switch (type) {
    case SECRET_TYPE_DOCKER_CONFIG_JSON:
      return json(DOCKER_CONFIG_JSON_KEY);
    case SECRET_TYPE_DOCKERCFG:
      return json(DOCKERCFG_KEY);
    case "kubernetes.io/basic-auth":
      return bytes.has("username") || bytes.has("password") ? [] : need("username", "password");
    case "kubernetes.io/ssh-auth":
      return (bytes.get("ssh-privatekey")?.length ?? 0) > 0
        ? []
        : [required(path.key("ssh-privatekey"))];
    case "kubernetes.io/tls":
      return need("tls.crt", "tls.key");
    case "kubernetes.io/service-account-token":
      if (annotations[SERVICE_ACCOUNT_NAME]) return [];
      return [required(FieldPath.root("metadata").child("annotations").key(SERVICE_ACCOUNT_NAME))];
    default:
      return [];
  }
}

/** The errors of replacing `old` with `next` (same kind, namespace and name): once an object is
 * immutable, its data and its immutability may not change. */
export function validateImmutableUpdate(
  old: ConfigMap | Secret,
  next: ConfigMap | Secret,
): FieldError[] {
  if (old.immutable !== true) return [];
  const errs: FieldError[] = [];
  if (next.immutable !== true) errs.push(forbidden("immutable", IMMUTABLE));
  if (!sameMap(old.data, next.data)) errs.push(forbidden("data", IMMUTABLE));
  if (old.kind === "ConfigMap" && next.kind === "ConfigMap") {
    if (!sameMap(old.binaryData, next.binaryData)) errs.push(forbidden("binaryData", IMMUTABLE));
  }
  return errs;
}
