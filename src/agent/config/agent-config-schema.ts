// The zod schema of the agent's config file (and of its flags, which set the same fields).
// Every field is optional here; defaults are applied after the file and the flags are merged.
// Durations are written as Go durations ("20s") and come out in milliseconds.

import { z } from "zod";
import { isDNS1123Subdomain, isQualifiedName, isValidLabelValue } from "../../api/index.ts";
import { parseCriEndpoint } from "../../cri/endpoint.ts";
import { sysctlPatternProblem } from "../sysctl/names.ts";
import { deviceConfigFields, hostDeviceGroupFields } from "./devices-schema.ts";
import { evictionConfigFields } from "./eviction-schema.ts";
import { gcConfigFields } from "./gc-schema.ts";
import { hubUrlEntries, hubUrlsProblem } from "./hub-urls.ts";
import { pullConfigFields } from "./pulls-schema.ts";
import { resourceConfigFields } from "./resources-schema.ts";
import { duration, durationOrZero, integerFrom } from "./schema-parts.ts";
import { closestName } from "./suggest.ts";
import { updateConfigFields } from "./updates-schema.ts";

const path = z.string({ error: "must be a string" }).min(1, { error: "must not be empty" });

const endpoint = z.string({ error: "must be a string" }).superRefine((v, ctx) => {
  try {
    parseCriEndpoint(v);
  } catch {
    ctx.addIssue({
      code: "custom",
      message:
        'must be "unix:///absolute/path/to/socket", e.g. "unix:///run/containerd/containerd.sock"',
    });
  }
});

const nodeName = z.string({ error: "must be a string" }).superRefine((v, ctx) => {
  const errs = isDNS1123Subdomain(v);
  if (errs.length > 0)
    ctx.addIssue({ code: "custom", message: `is not a valid node name: ${errs.join("; ")}` });
});

/** hub.url: one hub URL, several separated by commas, or a list of them; out comes the list. */
const hubUrl = z
  .union([z.string(), z.array(z.string())], {
    error: "must be a hub URL, several separated by commas, or a list of them",
  })
  .transform((v, ctx) => {
    const entries = hubUrlEntries(v);
    const problem = hubUrlsProblem(entries);
    if (problem === undefined) return entries;
    ctx.addIssue({ code: "custom", message: problem });
    return z.NEVER;
  });

const labels = z
  .record(z.string(), z.string({ error: "must be a string" }), {
    error: "must be a map of strings",
  })
  .superRefine((m, ctx) => {
    for (const [k, v] of Object.entries(m)) {
      const errs = [...isQualifiedName(k), ...isValidLabelValue(v)];
      if (errs.length > 0) {
        ctx.addIssue({
          code: "custom",
          path: [k],
          message: `is not a valid label: ${errs.join("; ")}`,
        });
      }
    }
  });

const sysctlPattern = z.string({ error: "must be a string" }).superRefine((v, ctx) => {
  const problem = sysctlPatternProblem(v);
  if (problem !== undefined) ctx.addIssue({ code: "custom", message: problem });
});

const absolutePath = z
  .string({ error: "must be a string" })
  .refine((v) => v.startsWith("/"), { error: "must be an absolute path" });

/** The fields of hubPodPolicy (docs/deploy.md, "Device policy"). */
const hubPodPolicyFields = [
  "allowPrivileged",
  "allowHostNetwork",
  "allowHostPID",
  "allowHostIPC",
  "allowedHostPathPrefixes",
  "allowedRegistries",
  "allowedCapabilities",
  "maxPods",
] as const;

const count = integerFrom(1, "must be at least 1");
const countOrZero = integerFrom(0, "must be 0 or more");

/** The fields an agent config file may hold; unknown fields are errors, to catch typos. */
const agentConfigFileSchema = z.strictObject(
  {
    staticPodPath: path.optional(),
    rootDir: path.optional(),
    containerRuntimeEndpoint: endpoint.optional(),
    nodeName: nodeName.optional(),
    fileCheckFrequency: duration.optional(),
    syncFrequency: duration.optional(),
    housekeepingInterval: duration.optional(),
    maxPods: count.optional(),
    podLogsDir: path.optional(),
    apiSocket: path.optional(),
    runtimeRequestTimeout: duration.optional(),
    imagePullCredentialsFile: path.optional(),
    imagesImportPath: path.optional(),
    maxParallelStarts: countOrZero.optional(),
    logLevel: z
      .enum(["debug", "info", "warn", "error"], {
        error: 'must be one of "debug", "info", "warn", "error"',
      })
      .optional(),
    logFormat: z.enum(["text", "json"], { error: 'must be "text" or "json"' }).optional(),
    plegRelistPeriod: duration.optional(),
    plegEventedRelistPeriod: durationOrZero.optional(),
    crashLoopBackOffBase: duration.optional(),
    crashLoopBackOffMax: duration.optional(),
    imagePullBackOffBase: duration.optional(),
    imagePullBackOffMax: duration.optional(),
    nodeStatusUpdateFrequency: duration.optional(),
    hubOutboxMaxEvents: count.optional(),
    hubReconnectBackOffBase: duration.optional(),
    hubReconnectBackOffMax: duration.optional(),
    nodeLabels: labels.optional(),
    allowedUnsafeSysctls: z
      .array(sysctlPattern, {
        error:
          'must be a list of sysctl names or patterns, e.g. ["kernel.msg*", "net.core.somaxconn"]',
      })
      .optional(),
    ...resourceConfigFields,
    ...gcConfigFields,
    ...pullConfigFields,
    ...updateConfigFields,
    ...evictionConfigFields,
    ...deviceConfigFields,
    /** How often the device's health is read (and sent to the hub when it changed). */
    deviceHealthPeriod: duration.optional(),
    /** The longest a health report waits when only counters and uptime changed. */
    deviceHealthCountersPeriod: duration.optional(),
    hubPodPolicy: z
      .strictObject(
        {
          allowPrivileged: z.boolean({ error: "must be true or false" }).optional(),
          allowHostNetwork: z.boolean({ error: "must be true or false" }).optional(),
          allowHostPID: z.boolean({ error: "must be true or false" }).optional(),
          allowHostIPC: z.boolean({ error: "must be true or false" }).optional(),
          allowedHostPathPrefixes: z
            .array(absolutePath, { error: "must be a list of absolute paths" })
            .optional(),
          allowedRegistries: z
            .array(z.string({ error: "must be a string" }).min(1), {
              error: 'must be a list of registry hosts, e.g. ["docker.io"]',
            })
            .optional(),
          allowedCapabilities: z
            .array(
              z.string({ error: "must be a string" }).regex(/^[A-Za-z][A-Za-z0-9_]*$/, {
                error: 'must be a capability name, e.g. "NET_ADMIN"',
              }),
              { error: 'must be a list of capability names, e.g. ["NET_ADMIN"]' },
            )
            .optional(),
          maxPods: countOrZero.optional(),
        },
        { error: `must be a mapping with ${hubPodPolicyFields.join(", ")}` },
      )
      .optional(),
    hub: z
      .strictObject(
        {
          url: hubUrl.optional(),
          joinToken: z.string({ error: "must be a string" }).optional(),
          caFile: path.optional(),
          insecure: z.boolean({ error: "must be true or false" }).optional(),
          maxStreams: count.optional(),
        },
        { error: "must be a mapping with url, joinToken, caFile, insecure and maxStreams" },
      )
      .optional(),
  },
  { error: "must be a mapping of fields" },
);

/** What the file (or the flags) set: durations in milliseconds, nothing defaulted. */
export type AgentConfigInput = z.output<typeof agentConfigFileSchema>;

/** The names of the file's top-level fields, for "did you mean" hints. */
const agentConfigFields: readonly string[] = Object.keys(agentConfigFileSchema.shape);

/** A problem in one field: `field` is its dotted path ("" for the whole file). */
export interface FieldProblem {
  field: string;
  message: string;
}

/**
 * Checks `raw` (the parsed YAML, or the object built from flags) against the schema. On failure
 * the single most useful problem is returned: an unknown field first (a typo usually explains
 * the rest), then the first other problem, phrased `<value> <what is wrong>`.
 */
export function checkAgentConfigInput(
  raw: unknown,
): { ok: true; value: AgentConfigInput } | { ok: false; problem: FieldProblem } {
  const result = agentConfigFileSchema.safeParse(raw);
  if (result.success) return { ok: true, value: result.data };
  const issues = result.error.issues;
  const issue = issues.find((i) => i.code === "unrecognized_keys") ?? issues[0];
  if (issue === undefined) return { ok: false, problem: { field: "", message: "is invalid" } };
  const problem = describeIssue(issue, raw);
  // A map key is part of the path: a 50,000-character label key is cut, as values are.
  const field = problem.field.length > 120 ? `${problem.field.slice(0, 117)}...` : problem.field;
  return { ok: false, problem: { ...problem, field } };
}

function describeIssue(issue: z.core.$ZodIssue, raw: unknown): FieldProblem {
  const parent = issue.path.map(String).join(".");
  if (issue.code === "unrecognized_keys") {
    const key = issue.keys[0] ?? "";
    const known =
      parent === "hub"
        ? ["url", "joinToken", "caFile", "insecure", "maxStreams"]
        : parent === "hubPodPolicy"
          ? hubPodPolicyFields
          : /^hostDevices\.\d+$/.test(parent)
            ? hostDeviceGroupFields
            : agentConfigFields;
    const guess = closestName(key, known);
    const hint =
      guess === undefined ? "" : ` (did you mean "${parent ? `${parent}.` : ""}${guess}"?)`;
    return { field: parent ? `${parent}.${key}` : key, message: `unknown field${hint}` };
  }
  // A custom issue about a map's key says what it is itself ({wholeMessage: true}).
  if (issue.code === "custom" && issue.params?.wholeMessage === true)
    return { field: parent, message: issue.message };
  // A field that is missing: the message says it is required.
  const value = valueAt(raw, issue.path);
  if (value === undefined) return { field: parent, message: issue.message };
  return { field: parent, message: `${showValue(value)} ${issue.message}` };
}

function valueAt(root: unknown, path: readonly PropertyKey[]): unknown {
  let cur = root;
  for (const seg of path) {
    if (cur === null || typeof cur !== "object") return undefined;
    cur = (cur as Record<PropertyKey, unknown>)[seg];
  }
  return cur;
}

/** A value as it appears in an error: strings quoted, long values cut. */
export function showValue(v: unknown): string {
  const text = v === undefined ? "undefined" : (jsonOf(v) ?? String(v));
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

/** JSON of `v`; a value that holds itself (a YAML alias inside its own anchor: `a: &a [*a]`)
 * has none, and says so. */
function jsonOf(v: unknown): string | undefined {
  try {
    return JSON.stringify(v);
  } catch {
    return "(a value that holds itself)";
  }
}
