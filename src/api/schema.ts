// Decoding a manifest into a Pod: the zod schemas check JSON types and enums the way the API
// server's decoder does (unknown fields are dropped, wrong types are errors), then
// validation.ts checks values. `validatePod` runs both.

import { z } from "zod";
import { affinitySchema } from "./affinity.ts";
import { type FieldError, notSupported, required } from "./field-error.ts";
import { envFromSource, envVar, objectMetaSchema, quantity, volume } from "./schema-config.ts";
import type * as api from "./types.ts";
import { validatePodValues } from "./validation.ts";

const int = z.int();
const str = z.string();
const bool = z.boolean();
const strList = z.array(str);
const strMap = z.record(str, str);

export { objectMetaSchema };

const resourceList = z.record(str, quantity);
const intOrString = z.union([int, str]);

const execAction = z.object({ command: strList.optional() });
const httpGetAction = z.object({
  path: str.optional(),
  port: intOrString,
  host: str.optional(),
  scheme: z.enum(["HTTP", "HTTPS"]).optional(),
  httpHeaders: z.array(z.object({ name: str, value: str })).optional(),
});
const tcpSocketAction = z.object({ port: intOrString, host: str.optional() });
const grpcAction = z.object({ port: int, service: str.optional() });

const probe = z.object({
  exec: execAction.optional(),
  httpGet: httpGetAction.optional(),
  tcpSocket: tcpSocketAction.optional(),
  grpc: grpcAction.optional(),
  initialDelaySeconds: int.optional(),
  timeoutSeconds: int.optional(),
  periodSeconds: int.optional(),
  successThreshold: int.optional(),
  failureThreshold: int.optional(),
  terminationGracePeriodSeconds: int.optional(),
});

const lifecycleHandler = z.object({
  exec: execAction.optional(),
  httpGet: httpGetAction.optional(),
  tcpSocket: tcpSocketAction.optional(),
  sleep: z.object({ seconds: int }).optional(),
});

const securityContext = z.object({
  runAsUser: int.optional(),
  runAsGroup: int.optional(),
  runAsNonRoot: bool.optional(),
  privileged: bool.optional(),
  capabilities: z.object({ add: strList.optional(), drop: strList.optional() }).optional(),
  readOnlyRootFilesystem: bool.optional(),
  allowPrivilegeEscalation: bool.optional(),
});

const container = z.object({
  name: str,
  image: str,
  imagePullPolicy: z.enum(["Always", "IfNotPresent", "Never"]).optional(),
  command: strList.optional(),
  args: strList.optional(),
  workingDir: str.optional(),
  env: z.array(envVar).optional(),
  envFrom: z.array(envFromSource).optional(),
  ports: z
    .array(
      z.object({
        name: str.optional(),
        containerPort: int,
        hostPort: int.optional(),
        protocol: z.enum(["TCP", "UDP", "SCTP"]).optional(),
        hostIP: str.optional(),
      }),
    )
    .optional(),
  resources: z
    .object({ requests: resourceList.optional(), limits: resourceList.optional() })
    .optional(),
  volumeMounts: z
    .array(
      z.object({
        name: str,
        mountPath: str,
        readOnly: bool.optional(),
        subPath: str.optional(),
        subPathExpr: str.optional(),
      }),
    )
    .optional(),
  livenessProbe: probe.optional(),
  readinessProbe: probe.optional(),
  startupProbe: probe.optional(),
  lifecycle: z
    .object({ postStart: lifecycleHandler.optional(), preStop: lifecycleHandler.optional() })
    .optional(),
  securityContext: securityContext.optional(),
  terminationMessagePath: str.optional(),
  terminationMessagePolicy: z.enum(["File", "FallbackToLogsOnError"]).optional(),
  restartPolicy: z.enum(["Always"]).optional(),
  stdin: bool.optional(),
  stdinOnce: bool.optional(),
  tty: bool.optional(),
});

const podSecurityContext = z.object({
  runAsUser: int.optional(),
  runAsGroup: int.optional(),
  runAsNonRoot: bool.optional(),
  fsGroup: int.optional(),
  supplementalGroups: z.array(int).optional(),
  sysctls: z.array(z.object({ name: str, value: str })).optional(),
});

/** The decoder for a PodSpec (also a DaemonSet's pod template). */
export const podSpecSchema = z.object({
  containers: z.array(container),
  initContainers: z.array(container).optional(),
  restartPolicy: z.enum(["Always", "OnFailure", "Never"]).optional(),
  terminationGracePeriodSeconds: int.optional(),
  activeDeadlineSeconds: int.optional(),
  hostNetwork: bool.optional(),
  hostPID: bool.optional(),
  hostIPC: bool.optional(),
  hostname: str.optional(),
  subdomain: str.optional(),
  dnsPolicy: z.enum(["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"]).optional(),
  dnsConfig: z
    .object({
      nameservers: strList.optional(),
      searches: strList.optional(),
      options: z.array(z.object({ name: str, value: str.optional() })).optional(),
    })
    .optional(),
  nodeName: str.optional(),
  nodeSelector: strMap.optional(),
  affinity: affinitySchema.optional(),
  volumes: z.array(volume).optional(),
  imagePullSecrets: z.array(z.object({ name: str.optional() })).optional(),
  securityContext: podSecurityContext.optional(),
  priority: int.optional(),
  priorityClassName: str.optional(),
  tolerations: z
    .array(
      z.object({
        key: str.optional(),
        operator: str.optional(),
        value: str.optional(),
        effect: str.optional(),
        tolerationSeconds: int.optional(),
      }),
    )
    .optional(),
});

/** The decoder for a Pod manifest. Its `status`, if any, is dropped (as on create). */
export const podManifestSchema = z.object({
  apiVersion: z.literal("v1"),
  kind: z.literal("Pod"),
  metadata: objectMetaSchema,
  spec: podSpecSchema,
});

/** The decoded manifest is exactly a Pod; a mismatch with types.ts fails to compile. */
type Exact<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const schemaMatchesTypes: Exact<z.output<typeof podManifestSchema>, Omit<api.Pod, "status">> = true;
void schemaMatchesTypes;

export type ValidatePodResult = { ok: true; pod: api.Pod } | { ok: false; errors: FieldError[] };

/**
 * Decodes and validates a parsed manifest (the object from YAML or JSON) as the API server
 * would on create, for the fields fleetlet supports. On success `pod` holds only known fields,
 * with quantities as strings, and no defaults applied (see applyPodDefaults). On failure every
 * problem found is returned; type errors are reported before value checks run.
 */
export function validatePod(obj: unknown): ValidatePodResult {
  const decoded = decodeObject(podManifestSchema, obj);
  if (!decoded.ok) return decoded;
  const pod: api.Pod = decoded.value;
  const errors = validatePodValues(pod);
  return errors.length === 0 ? { ok: true, pod } : { ok: false, errors };
}

/** Decodes a parsed document with `schema` as the API server's JSON decoder would: nulls are
 * unset, unknown fields dropped, type errors returned as field errors. */
export function decodeObject<T>(
  schema: z.ZodType<T>,
  obj: unknown,
): { ok: true; value: T } | { ok: false; errors: FieldError[] } {
  const input = dropNulls(obj);
  const decoded = schema.safeParse(input);
  if (!decoded.success) {
    return { ok: false, errors: decoded.error.issues.map((i) => issueToFieldError(i, input)) };
  }
  return { ok: true, value: decoded.data };
}

/** Object keys set to null mean "not set", as in the API server's JSON decoding. A
 * "__proto__" key is dropped so that it cannot change the copy's prototype. */
export function dropNulls(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(dropNulls);
  if (v === null || typeof v !== "object") return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) {
    if (x !== null && k !== "__proto__") out[k] = dropNulls(x);
  }
  return out;
}

/** Fields that are maps; their keys print as `[key]`, as Kubernetes does. */
const mapFields = new Set([
  "labels",
  "annotations",
  "nodeSelector",
  "requests",
  "limits",
  "data",
  "binaryData",
  "stringData",
  "matchLabels",
]);

function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  let prev: PropertyKey | undefined;
  for (const seg of path) {
    if (typeof seg === "number") out += `[${seg}]`;
    else if (typeof prev === "string" && mapFields.has(prev)) out += `[${String(seg)}]`;
    else out += out === "" ? String(seg) : `.${String(seg)}`;
    prev = seg;
  }
  return out;
}

function valueAt(root: unknown, path: readonly PropertyKey[]): unknown {
  let cur: unknown = root;
  for (const seg of path) {
    if (cur === null || typeof cur !== "object") return undefined;
    cur = (cur as Record<PropertyKey, unknown>)[seg];
  }
  return cur;
}

function describeType(expected: string): string {
  if (expected === "int" || expected === "number") return "integer"; // all our numbers are integers
  if (expected === "record") return "object";
  return expected;
}

/** A zod issue of decoding `input` as a field error with the API server's wording. */
export function issueToFieldError(issue: z.core.$ZodIssue, input: unknown): FieldError {
  const field = formatPath(issue.path);
  const value = valueAt(input, issue.path);
  if (value === undefined) return required(field);
  switch (issue.code) {
    case "invalid_type":
      return {
        type: "TypeInvalid",
        field,
        badValue: value,
        detail: `must be of type ${describeType(issue.expected)}`,
      };
    case "invalid_value":
      return notSupported(field, value, issue.values.map(String));
    case "invalid_union":
      return {
        type: "TypeInvalid",
        field,
        badValue: value,
        detail: "must be a string or a number",
      };
    default:
      return { type: "Invalid", field, badValue: value, detail: issue.message };
  }
}
