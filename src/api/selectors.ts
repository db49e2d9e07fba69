// Label and field selectors with the Kubernetes syntax. Parsing throws SelectorError with a
// message for a 400 response; matching is pure.
import type { Event, Pod } from "./types.ts";

export class SelectorError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SelectorError";
  }
}

type LabelRequirement =
  | { op: "exists" | "!exists"; key: string }
  | { op: "=" | "!="; key: string; value: string }
  | { op: "in" | "notin"; key: string; values: string[] };

export type LabelSelector = (labels: Record<string, string> | undefined) => boolean;

/** Splits on commas that are not inside parentheses. */
function splitTerms(s: string): string[] {
  const terms: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === "(") depth++;
    else if (c === ")") depth--;
    else if (c === "," && depth === 0) {
      terms.push(s.slice(start, i));
      start = i + 1;
    }
  }
  terms.push(s.slice(start));
  return terms.map((t) => t.trim()).filter((t) => t !== "");
}

const keyRe = /^([a-zA-Z0-9][-a-zA-Z0-9_./]*)?[a-zA-Z0-9]$/;
const valueRe = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

function parseRequirement(term: string, whole: string): LabelRequirement {
  const fail = (why: string) =>
    new SelectorError(`invalid label selector ${JSON.stringify(whole)}: ${why}`);
  const checkKey = (key: string) => {
    if (!keyRe.test(key)) throw fail(`invalid label key ${JSON.stringify(key)}`);
    return key;
  };
  const checkValue = (v: string) => {
    if (!valueRe.test(v)) throw fail(`invalid label value ${JSON.stringify(v)}`);
    return v;
  };
  const set = /^(\S+)\s+(in|notin)\s*\(([^)]*)\)$/.exec(term);
  if (set) {
    const values = (set[3] ?? "").split(",").map((v) => checkValue(v.trim()));
    const op = set[2] === "in" ? "in" : "notin";
    return { op, key: checkKey(set[1] ?? ""), values };
  }
  const cmp = /^([^=!\s]+)\s*(==|=|!=)\s*(.*)$/.exec(term);
  if (cmp) {
    const op = cmp[2] === "!=" ? "!=" : "=";
    return { op, key: checkKey(cmp[1] ?? ""), value: checkValue(cmp[3] ?? "") };
  }
  if (term.startsWith("!")) return { op: "!exists", key: checkKey(term.slice(1).trim()) };
  return { op: "exists", key: checkKey(term) };
}

function matches(r: LabelRequirement, labels: Record<string, string>): boolean {
  // Own keys only: "constructor" is not a label of every object.
  const v = Object.hasOwn(labels, r.key) ? labels[r.key] : undefined;
  switch (r.op) {
    case "exists":
      return v !== undefined;
    case "!exists":
      return v === undefined;
    case "=":
      return v === r.value;
    case "!=":
      return v !== r.value;
    case "in":
      return v !== undefined && r.values.includes(v);
    case "notin":
      return v === undefined || !r.values.includes(v);
  }
}

/** Parses "k=v,k2!=v2,k3 in (a,b),!k4"; an empty selector matches everything. */
export function parseLabelSelector(selector: string): LabelSelector {
  const reqs = splitTerms(selector).map((t) => parseRequirement(t, selector));
  return (labels) => reqs.every((r) => matches(r, labels ?? {}));
}

/** Readers of the fields a resource can be selected by. */
export type FieldSet<T> = Record<string, (obj: T) => string | undefined>;

export const podFields: FieldSet<Pod> = {
  "metadata.name": (p) => p.metadata.name,
  "metadata.namespace": (p) => p.metadata.namespace ?? "default",
  "spec.nodeName": (p) => p.spec.nodeName,
  "spec.restartPolicy": (p) => p.spec.restartPolicy,
  "status.phase": (p) => p.status?.phase,
  "status.podIP": (p) => p.status?.podIP,
};

export const eventFields: FieldSet<Event> = {
  "metadata.name": (e) => e.metadata.name,
  "metadata.namespace": (e) => e.metadata.namespace,
  "involvedObject.kind": (e) => e.involvedObject.kind,
  "involvedObject.namespace": (e) => e.involvedObject.namespace,
  "involvedObject.name": (e) => e.involvedObject.name,
  "involvedObject.uid": (e) => e.involvedObject.uid,
  "involvedObject.fieldPath": (e) => e.involvedObject.fieldPath,
  reason: (e) => e.reason,
  type: (e) => e.type,
  "source.component": (e) => e.source.component,
  "source.host": (e) => e.source.host,
};

/** A field term's parts: the field (no "=" or "!" in it, trailing spaces dropped), the operator
 * (the first "=", "==" or "!=") and the value (leading spaces dropped). One scan of the text: a
 * regular expression with a lazy field and optional spaces took time quadratic in the spaces. */
function splitFieldTerm(term: string): { field: string; op: string; value: string } | undefined {
  const at = term.search(/[=!]/);
  if (at <= 0) return undefined;
  const op = term.startsWith("!=", at) ? "!=" : term.startsWith("==", at) ? "==" : "=";
  if (term[at] === "!" && op !== "!=") return undefined;
  const field = term.slice(0, at).trimEnd();
  if (field === "") return undefined;
  return { field, op, value: term.slice(at + op.length).trimStart() };
}

/** Parses "field=value,field2!=value2" over the given fields; unknown fields are refused. */
export function parseFieldSelector<T>(selector: string, fields: FieldSet<T>): (obj: T) => boolean {
  const reqs = splitTerms(selector).map((term) => {
    const m = splitFieldTerm(term);
    if (!m) {
      throw new SelectorError(
        `invalid field selector ${JSON.stringify(selector)}: ${JSON.stringify(term)} is not field=value`,
      );
    }
    const read = Object.hasOwn(fields, m.field) ? fields[m.field] : undefined;
    if (read === undefined) throw new SelectorError(`field label not supported: ${m.field}`);
    return { read, negate: m.op === "!=", value: m.value };
  });
  return (obj) => reqs.every((r) => ((r.read(obj) ?? "") === r.value) !== r.negate);
}
