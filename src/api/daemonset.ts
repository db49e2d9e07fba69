// apps/v1 DaemonSet and ControllerRevision for the hub (docs/deploy.md): the shapes, the decoder
// and the API server's value checks (pkg/apis/apps/validation) for the fields fleetlet supports,
// plus the checks of fleetlet's rollout annotations. `validateDaemonSet` decodes and validates.
import { z } from "zod";
import { labelValue, requirementHolds } from "./affinity.ts";
import { applyDaemonSetDefaults } from "./daemonset-defaults.ts";
import { parseDuration } from "./duration.ts";
import {
  type FieldError,
  FieldPath,
  forbidden,
  invalid,
  notSupported,
  required,
} from "./field-error.ts";
import { isQualifiedName, isValidLabelValue } from "./names.ts";
import { dropNulls, issueToFieldError, objectMetaSchema, podSpecSchema } from "./schema.ts";
import type { ConditionStatus, IntOrString, ObjectMeta, PodSpec, Time } from "./types.ts";
import { validateObjectMeta, validatePodSpec } from "./validation.ts";

type LabelSelectorOperator = "In" | "NotIn" | "Exists" | "DoesNotExist";

interface LabelSelectorRequirement {
  key: string;
  operator: LabelSelectorOperator;
  values?: string[];
}

/** matchLabels and matchExpressions are ANDed; an empty selector matches everything. */
export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: LabelSelectorRequirement[];
}

export interface PodTemplateSpec {
  metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> };
  spec: PodSpec;
}

export interface DaemonSetSpec {
  selector: LabelSelector;
  template: PodTemplateSpec;
  updateStrategy?: {
    type?: "RollingUpdate" | "OnDelete";
    rollingUpdate?: { maxUnavailable?: IntOrString; maxSurge?: IntOrString };
  };
  minReadySeconds?: number;
  revisionHistoryLimit?: number;
}

export interface DaemonSetCondition {
  type: string;
  status: ConditionStatus;
  lastTransitionTime?: Time;
  reason?: string;
  message?: string;
}

export interface DaemonSetStatus {
  currentNumberScheduled: number;
  numberMisscheduled: number;
  desiredNumberScheduled: number;
  numberReady: number;
  observedGeneration?: number;
  updatedNumberScheduled?: number;
  numberAvailable?: number;
  numberUnavailable?: number;
  conditions?: DaemonSetCondition[];
}

export interface DaemonSet {
  apiVersion: "apps/v1";
  kind: "DaemonSet";
  metadata: ObjectMeta;
  spec: DaemonSetSpec;
  status?: DaemonSetStatus;
}

/** One revision of a DaemonSet's pod template. */
export interface ControllerRevision {
  apiVersion: "apps/v1";
  kind: "ControllerRevision";
  metadata: ObjectMeta;
  /** `{spec: {template}}`, as the DaemonSet controller stores it. */
  data: { spec: { template: PodTemplateSpec } };
  revision: number;
}

/** fleetlet's rollout settings, as DaemonSet annotations (docs/deploy.md). */
export const ROLLOUT_ANNOTATIONS = {
  canary: "rollout.fleetlet.io/canary",
  progressDeadline: "rollout.fleetlet.io/progress-deadline",
  autoRollback: "rollout.fleetlet.io/auto-rollback",
} as const;
/** kubectl's change cause, shown by `rollout history`. */
export const CHANGE_CAUSE_ANNOTATION = "kubernetes.io/change-cause";
/** The label carrying a pod's template hash. */
export const REVISION_HASH_LABEL = "controller-revision-hash";

const str = z.string();
const strMap = z.record(str, str);
const intOrString = z.union([z.int(), str]);

const labelSelectorSchema = z.object({
  matchLabels: strMap.optional(),
  matchExpressions: z
    .array(
      z.object({
        key: str,
        operator: z.enum(["In", "NotIn", "Exists", "DoesNotExist"]),
        values: z.array(str).optional(),
      }),
    )
    .optional(),
});

const podTemplateSchema = z.object({
  metadata: z.object({ labels: strMap.optional(), annotations: strMap.optional() }).optional(),
  spec: podSpecSchema,
});

const daemonSetSchema = z.object({
  apiVersion: z.literal("apps/v1"),
  kind: z.literal("DaemonSet"),
  metadata: objectMetaSchema,
  spec: z.object({
    selector: labelSelectorSchema,
    template: podTemplateSchema,
    updateStrategy: z
      .object({
        type: z.enum(["RollingUpdate", "OnDelete"]).optional(),
        rollingUpdate: z
          .object({ maxUnavailable: intOrString.optional(), maxSurge: intOrString.optional() })
          .optional(),
      })
      .optional(),
    minReadySeconds: z.int().optional(),
    revisionHistoryLimit: z.int().optional(),
  }),
});

type Exact<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const schemaMatchesTypes: Exact<z.output<typeof daemonSetSchema>, Omit<DaemonSet, "status">> = true;
void schemaMatchesTypes;

/** Whether `labels` satisfy the selector (an empty selector matches everything). */
export function selectorMatches(sel: LabelSelector, labels: Record<string, string>): boolean {
  for (const [k, v] of Object.entries(sel.matchLabels ?? {})) if (labels[k] !== v) return false;
  return (sel.matchExpressions ?? []).every((r) => requirementHolds(r, labelValue(labels, r.key)));
}

function validateLabelSelector(sel: LabelSelector, path: FieldPath): FieldError[] {
  const errs: FieldError[] = [];
  for (const [k, v] of Object.entries(sel.matchLabels ?? {})) {
    const p = path.child("matchLabels");
    errs.push(...isQualifiedName(k).map((m) => invalid(p, k, m)));
    errs.push(...isValidLabelValue(v).map((m) => invalid(p.key(k), v, m)));
  }
  (sel.matchExpressions ?? []).forEach((r, i) => {
    const p = path.child("matchExpressions").index(i);
    const n = r.values?.length ?? 0;
    errs.push(...isQualifiedName(r.key).map((m) => invalid(p.child("key"), r.key, m)));
    if ((r.operator === "In" || r.operator === "NotIn") && n === 0)
      errs.push(
        required(p.child("values"), "must be specified when `operator` is 'In' or 'NotIn'"),
      );
    if ((r.operator === "Exists" || r.operator === "DoesNotExist") && n > 0)
      errs.push(
        forbidden(
          p.child("values"),
          "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        ),
      );
  });
  return errs;
}

/** A count or percent: 3 or "25%". Returns the error detail, or undefined when valid. */
function intOrPercentProblem(v: IntOrString): string | undefined {
  if (typeof v === "number") return v < 0 ? "must be greater than or equal to 0" : undefined;
  const m = /^(\d+)%$/.exec(v);
  if (m === null)
    return "a valid percent string must be a numeric string followed by an ending '%'";
  return Number(m[1]) > 100 ? "must not be greater than 100%" : undefined;
}

/** Resolves a count or percent of `total`, percents rounded up (as the DaemonSet controller). */
export function scaledValue(v: IntOrString, total: number): number {
  if (typeof v === "number") return v;
  return Math.ceil((Number(v.slice(0, -1)) * total) / 100);
}

function validateStrategy(spec: DaemonSetSpec, path: FieldPath): FieldError[] {
  const errs: FieldError[] = [];
  const strategy = spec.updateStrategy;
  const p = path.child("updateStrategy");
  if (strategy?.type === "OnDelete")
    errs.push(notSupported(p.child("type"), "OnDelete", ["RollingUpdate"]));
  const ru = strategy?.rollingUpdate;
  const rp = p.child("rollingUpdate");
  for (const field of ["maxUnavailable", "maxSurge"] as const) {
    const v = ru?.[field];
    const problem = v === undefined ? undefined : intOrPercentProblem(v);
    if (v !== undefined && problem !== undefined) errs.push(invalid(rp.child(field), v, problem));
  }
  const surge = ru?.maxSurge;
  if (surge !== undefined && surge !== 0 && surge !== "0%")
    errs.push(
      invalid(
        rp.child("maxSurge"),
        surge,
        "fleetlet runs one pod of a name per device: only 0 is supported",
      ),
    );
  const unavailable = ru?.maxUnavailable;
  if (unavailable === 0 || unavailable === "0%")
    errs.push(
      invalid(rp.child("maxUnavailable"), unavailable, "may not be 0 when `maxSurge` is 0"),
    );
  for (const field of ["minReadySeconds", "revisionHistoryLimit"] as const) {
    const v = spec[field];
    if (v !== undefined && v < 0)
      errs.push(invalid(path.child(field), v, "must be greater than or equal to 0"));
  }
  return errs;
}

function validateRolloutAnnotations(
  annotations: Record<string, string>,
  path: FieldPath,
): FieldError[] {
  const errs: FieldError[] = [];
  const canary = annotations[ROLLOUT_ANNOTATIONS.canary];
  if (canary !== undefined) {
    const value = /^\d+$/.test(canary) ? Number(canary) : canary;
    const problem = intOrPercentProblem(value);
    if (problem !== undefined)
      errs.push(
        invalid(
          path.key(ROLLOUT_ANNOTATIONS.canary),
          canary,
          `${problem} (a number or a percent of devices)`,
        ),
      );
  }
  const deadline = annotations[ROLLOUT_ANNOTATIONS.progressDeadline];
  if (deadline !== undefined) {
    let ms = 0;
    try {
      ms = parseDuration(deadline);
    } catch {
      ms = 0;
    }
    if (ms <= 0)
      errs.push(
        invalid(
          path.key(ROLLOUT_ANNOTATIONS.progressDeadline),
          deadline,
          'must be a positive duration, e.g. "10m"',
        ),
      );
  }
  const rollback = annotations[ROLLOUT_ANNOTATIONS.autoRollback];
  if (rollback !== undefined && rollback !== "true" && rollback !== "false")
    errs.push(
      notSupported(path.key(ROLLOUT_ANNOTATIONS.autoRollback), rollback, ["true", "false"]),
    );
  return errs;
}

function validateTemplate(ds: DaemonSet, path: FieldPath): FieldError[] {
  const errs: FieldError[] = [];
  const tmpl = ds.spec.template;
  const labels = tmpl.metadata?.labels ?? {};
  const meta = validateObjectMeta(
    { name: "template", labels, annotations: tmpl.metadata?.annotations ?? {} },
    path.child("metadata"),
  );
  errs.push(...meta);
  const selector = ds.spec.selector;
  const empty =
    Object.keys(selector.matchLabels ?? {}).length === 0 &&
    (selector.matchExpressions ?? []).length === 0;
  if (!empty && !selectorMatches(selector, labels))
    errs.push(
      invalid(
        path.child("metadata").child("labels"),
        labels,
        "`selector` does not match template `labels`",
      ),
    );
  const spec = tmpl.spec;
  const sp = path.child("spec");
  errs.push(...validatePodSpec(spec, sp));
  if (spec.restartPolicy !== undefined && spec.restartPolicy !== "Always")
    errs.push(notSupported(sp.child("restartPolicy"), spec.restartPolicy, ["Always"]));
  if (spec.activeDeadlineSeconds !== undefined)
    errs.push(
      forbidden(
        sp.child("activeDeadlineSeconds"),
        "activeDeadlineSeconds in DaemonSet is not Supported",
      ),
    );
  if (spec.nodeName !== undefined && spec.nodeName !== "")
    errs.push(
      forbidden(sp.child("nodeName"), "the hub binds each pod to its device; leave nodeName empty"),
    );
  return errs;
}

/** All value errors of a decoded DaemonSet; empty when it is valid. */
function validateDaemonSetValues(ds: DaemonSet): FieldError[] {
  const root = FieldPath.root("");
  const errs = validateObjectMeta(ds.metadata, FieldPath.root("metadata"));
  errs.push(
    ...validateRolloutAnnotations(
      ds.metadata.annotations ?? {},
      FieldPath.root("metadata").child("annotations"),
    ),
  );
  const sp = root.child("spec");
  const selector = ds.spec.selector;
  if (
    Object.keys(selector.matchLabels ?? {}).length === 0 &&
    (selector.matchExpressions ?? []).length === 0
  )
    errs.push(invalid(sp.child("selector"), selector, "empty selector is invalid for daemonset"));
  errs.push(...validateLabelSelector(selector, sp.child("selector")));
  errs.push(...validateTemplate(ds, sp.child("template")));
  errs.push(...validateStrategy(ds.spec, sp));
  return errs;
}

export type ValidateDaemonSetResult =
  | { ok: true; daemonSet: DaemonSet }
  | { ok: false; errors: FieldError[] };

/** Decodes, defaults (applyDaemonSetDefaults) and validates a DaemonSet as the API server would
 * on create; `status` is dropped. */
export function validateDaemonSet(obj: unknown): ValidateDaemonSetResult {
  const input = dropNulls(obj);
  const decoded = daemonSetSchema.safeParse(input);
  if (!decoded.success)
    return { ok: false, errors: decoded.error.issues.map((i) => issueToFieldError(i, input)) };
  const daemonSet = applyDaemonSetDefaults(decoded.data);
  const errors = validateDaemonSetValues(daemonSet);
  return errors.length === 0 ? { ok: true, daemonSet } : { ok: false, errors };
}
