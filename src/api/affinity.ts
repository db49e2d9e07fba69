// Node selection of a pod: `spec.nodeSelector` and the required node affinity, with the API
// server's value checks and the scheduler's matching rules (a term's expressions all hold; any
// one term is enough; an empty term list matches nothing). Pure.
import { z } from "zod";
import {
  type FieldError,
  type FieldPath,
  forbidden,
  invalid,
  notSupported,
  required,
} from "./field-error.ts";
import { isQualifiedName, isValidLabelValue } from "./names.ts";

export type NodeSelectorOperator = "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt";

interface NodeSelectorRequirement {
  key: string;
  operator: NodeSelectorOperator;
  values?: string[];
}

/** The expressions of one term are ANDed. `matchFields` knows `metadata.name` only. */
interface NodeSelectorTerm {
  matchExpressions?: NodeSelectorRequirement[];
  matchFields?: NodeSelectorRequirement[];
}

/** The terms are ORed. */
interface NodeSelector {
  nodeSelectorTerms: NodeSelectorTerm[];
}

interface NodeAffinity {
  requiredDuringSchedulingIgnoredDuringExecution?: NodeSelector;
}

export interface Affinity {
  nodeAffinity?: NodeAffinity;
}

const operators = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"] as const;

const requirementSchema = z.object({
  key: z.string(),
  operator: z.enum(operators),
  values: z.array(z.string()).optional(),
});

export const affinitySchema = z.object({
  nodeAffinity: z
    .object({
      requiredDuringSchedulingIgnoredDuringExecution: z
        .object({
          nodeSelectorTerms: z.array(
            z.object({
              matchExpressions: z.array(requirementSchema).optional(),
              matchFields: z.array(requirementSchema).optional(),
            }),
          ),
        })
        .optional(),
    })
    .optional(),
});

function validateRequirement(
  r: NodeSelectorRequirement,
  path: FieldPath,
  field: boolean,
): FieldError[] {
  const errs: FieldError[] = [];
  const values = r.values ?? [];
  const vp = path.child("values");
  if (field) {
    if (r.key !== "metadata.name")
      errs.push(notSupported(path.child("key"), r.key, ["metadata.name"]));
    if (r.operator !== "In" && r.operator !== "NotIn")
      errs.push(notSupported(path.child("operator"), r.operator, ["In", "NotIn"]));
    else if (values.length !== 1)
      errs.push(
        required(
          vp,
          "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
        ),
      );
    return errs;
  }
  errs.push(...isQualifiedName(r.key).map((m) => invalid(path.child("key"), r.key, m)));
  switch (r.operator) {
    case "In":
    case "NotIn":
      if (values.length === 0)
        errs.push(required(vp, "must be specified when `operator` is 'In' or 'NotIn'"));
      break;
    case "Exists":
    case "DoesNotExist":
      if (values.length > 0)
        errs.push(
          forbidden(vp, "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"),
        );
      break;
    case "Gt":
    case "Lt":
      if (values.length !== 1)
        errs.push(required(vp, "must be specified single value when `operator` is 'Lt' or 'Gt'"));
      else if (!/^-?\d+$/.test(values[0] ?? ""))
        errs.push(invalid(vp.index(0), values[0], "must be an integer"));
      break;
  }
  if (r.operator !== "Gt" && r.operator !== "Lt")
    values.forEach((v, i) => {
      errs.push(...isValidLabelValue(v).map((m) => invalid(vp.index(i), v, m)));
    });
  return errs;
}

/** The value errors of `spec.affinity`. */
export function validateAffinity(affinity: Affinity | undefined, path: FieldPath): FieldError[] {
  const required_ = affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution;
  if (required_ === undefined) return [];
  const p = path
    .child("nodeAffinity")
    .child("requiredDuringSchedulingIgnoredDuringExecution")
    .child("nodeSelectorTerms");
  if (required_.nodeSelectorTerms.length === 0)
    return [required(p, "must have at least one node selector term")];
  const errs: FieldError[] = [];
  required_.nodeSelectorTerms.forEach((term, i) => {
    (term.matchExpressions ?? []).forEach((r, j) => {
      errs.push(...validateRequirement(r, p.index(i).child("matchExpressions").index(j), false));
    });
    (term.matchFields ?? []).forEach((r, j) => {
      errs.push(...validateRequirement(r, p.index(i).child("matchFields").index(j), true));
    });
  });
  return errs;
}

/** The value of label `key`, own keys only ("constructor" is not a label of every map). */
export function labelValue(labels: Record<string, string>, key: string): string | undefined {
  return Object.hasOwn(labels, key) ? labels[key] : undefined;
}

/** Whether a label (or field) value satisfies one requirement. */
export function requirementHolds(
  r: { operator: NodeSelectorOperator; values?: string[] },
  value: string | undefined,
): boolean {
  const values = r.values ?? [];
  switch (r.operator) {
    case "In":
      return value !== undefined && values.includes(value);
    case "NotIn":
      return value === undefined || !values.includes(value);
    case "Exists":
      return value !== undefined;
    case "DoesNotExist":
      return value === undefined;
    case "Gt":
    case "Lt": {
      if (value === undefined || !/^-?\d+$/.test(value)) return false;
      const have = Number(value);
      const want = Number(values[0]);
      return r.operator === "Gt" ? have > want : have < want;
    }
  }
}

function termMatches(
  term: NodeSelectorTerm,
  nodeName: string,
  labels: Record<string, string>,
): boolean {
  const exprs = term.matchExpressions ?? [];
  const fields = term.matchFields ?? [];
  // An empty term matches no node, as the scheduler's.
  if (exprs.length === 0 && fields.length === 0) return false;
  return (
    exprs.every((r) => requirementHolds(r, labelValue(labels, r.key))) &&
    fields.every((r) => requirementHolds(r, r.key === "metadata.name" ? nodeName : undefined))
  );
}

/**
 * Whether a pod with this node selection may run on the node named `nodeName` with `labels`:
 * every nodeSelector entry equal, and one required affinity term satisfied (when there is one).
 */
export function nodeMatches(
  spec: { nodeSelector?: Record<string, string>; affinity?: Affinity },
  nodeName: string,
  labels: Record<string, string>,
): boolean {
  for (const [k, v] of Object.entries(spec.nodeSelector ?? {})) if (labels[k] !== v) return false;
  const terms =
    spec.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms;
  if (terms === undefined) return true;
  return terms.some((t) => termMatches(t, nodeName, labels));
}
