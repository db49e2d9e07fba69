// zod decoders for volumes and environment sources (used by the Pod decoder in schema.ts), and
// for ConfigMap and Secret documents. As everywhere in schema.ts, unknown fields are dropped and
// wrong types are errors; values are checked afterwards (validate-volumes.ts, validate-env.ts,
// validate-objects.ts).

import { z } from "zod";
import type * as api from "./types-config.ts";

const int = z.int();
const str = z.string();
const bool = z.boolean();
const strMap = z.record(str, str);

/** A quantity as the user may write it: "500m", "1Gi", or a bare YAML number (0.5, 2). */
export const quantity = z
  .union([str, z.number()])
  .transform((v) => (typeof v === "number" ? String(v) : v));

const fieldRef = z.object({ apiVersion: str.optional(), fieldPath: str });
const resourceFieldRef = z.object({
  containerName: str.optional(),
  resource: str,
  divisor: quantity.optional(),
});
const keySelector = z.object({ name: str.optional(), key: str, optional: bool.optional() });
const namedOptional = z.object({ name: str.optional(), optional: bool.optional() });

export const envVar = z.object({
  name: str,
  value: str.optional(),
  valueFrom: z
    .object({
      fieldRef: fieldRef.optional(),
      resourceFieldRef: resourceFieldRef.optional(),
      configMapKeyRef: keySelector.optional(),
      secretKeyRef: keySelector.optional(),
    })
    .optional(),
});

export const envFromSource = z.object({
  prefix: str.optional(),
  configMapRef: namedOptional.optional(),
  secretRef: namedOptional.optional(),
});

const keyToPath = z.object({ key: str, path: str, mode: int.optional() });
const items = z.array(keyToPath).optional();
const downwardFile = z.object({
  path: str,
  fieldRef: fieldRef.optional(),
  resourceFieldRef: resourceFieldRef.optional(),
  mode: int.optional(),
});
const downwardItems = z.array(downwardFile).optional();
const anyObject = z.record(str, z.unknown());

const hostPathTypes = [
  "",
  "DirectoryOrCreate",
  "Directory",
  "FileOrCreate",
  "File",
  "Socket",
  "CharDevice",
  "BlockDevice",
] as const;

const projection = z.object({
  configMap: z.object({ name: str.optional(), items, optional: bool.optional() }).optional(),
  secret: z.object({ name: str.optional(), items, optional: bool.optional() }).optional(),
  downwardAPI: z.object({ items: downwardItems }).optional(),
  serviceAccountToken: z
    .object({ audience: str.optional(), expirationSeconds: int.optional(), path: str })
    .optional(),
  clusterTrustBundle: anyObject.optional(),
  podCertificate: anyObject.optional(),
});

export const volume = z.object({
  name: str,
  emptyDir: z
    .object({ medium: z.enum(["", "Memory"]).optional(), sizeLimit: quantity.optional() })
    .optional(),
  hostPath: z.object({ path: str, type: z.enum(hostPathTypes).optional() }).optional(),
  configMap: z
    .object({
      name: str.optional(),
      items,
      defaultMode: int.optional(),
      optional: bool.optional(),
    })
    .optional(),
  secret: z
    .object({
      secretName: str.optional(),
      items,
      defaultMode: int.optional(),
      optional: bool.optional(),
    })
    .optional(),
  downwardAPI: z.object({ items: downwardItems, defaultMode: int.optional() }).optional(),
  projected: z
    .object({ sources: z.array(projection).optional(), defaultMode: int.optional() })
    .optional(),
});

/** metadata of a Kubernetes object, as fleetlet reads it. */
export const objectMetaSchema = z.object({
  name: str,
  namespace: str.optional(),
  uid: str.optional(),
  labels: strMap.optional(),
  annotations: strMap.optional(),
  creationTimestamp: str.optional(),
  deletionTimestamp: str.optional(),
  deletionGracePeriodSeconds: int.optional(),
  generation: int.optional(),
  resourceVersion: str.optional(),
  ownerReferences: z
    .array(
      z.object({
        apiVersion: str,
        kind: str,
        name: str,
        uid: str,
        controller: bool.optional(),
        blockOwnerDeletion: bool.optional(),
      }),
    )
    .optional(),
});

export const configMapSchema = z.object({
  apiVersion: z.literal("v1"),
  kind: z.literal("ConfigMap"),
  metadata: objectMetaSchema,
  data: strMap.optional(),
  binaryData: strMap.optional(),
  immutable: bool.optional(),
});

export const secretSchema = z.object({
  apiVersion: z.literal("v1"),
  kind: z.literal("Secret"),
  metadata: objectMetaSchema,
  data: strMap.optional(),
  stringData: strMap.optional(),
  type: str.optional(),
  immutable: bool.optional(),
});

/** The decoders match types-config.ts exactly; a mismatch fails to compile. */
type Exact<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const volumeMatches: Exact<z.output<typeof volume>, api.Volume> = true;
const configMapMatches: Exact<z.output<typeof configMapSchema>, api.ConfigMap> = true;
const secretMatches: Exact<z.output<typeof secretSchema>, api.Secret> = true;
const envFromMatches: Exact<z.output<typeof envFromSource>, api.EnvFromSource> = true;
void [volumeMatches, configMapMatches, secretMatches, envFromMatches];
