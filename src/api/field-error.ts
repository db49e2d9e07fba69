// Field errors in the shape and wording of the Kubernetes API server
// ("spec.containers[0].image: Required value").
import { StatusError } from "./status.ts";

type FieldErrorType =
  | "Required"
  | "Invalid"
  | "TypeInvalid"
  | "Duplicate"
  | "NotSupported"
  | "NotFound"
  | "Forbidden"
  | "TooMany"
  | "TooLong";

export interface FieldError {
  type: FieldErrorType;
  /** Kubernetes-style path, e.g. "spec.containers[0].ports[1].name" or "metadata.labels[app]". */
  field: string;
  /** The offending value, when there is one to show. */
  badValue?: unknown;
  detail?: string;
}

/** A field path, built with FieldPath or given as its text. */
export type PathLike = FieldPath | string;

/** Builds Kubernetes-style field paths; immutable, each call returns a new path. */
export class FieldPath {
  private constructor(private readonly text: string) {}

  static root(name: string): FieldPath {
    return new FieldPath(name);
  }

  child(name: string): FieldPath {
    return new FieldPath(this.text === "" ? name : `${this.text}.${name}`);
  }

  index(i: number): FieldPath {
    return new FieldPath(`${this.text}[${i}]`);
  }

  key(k: string): FieldPath {
    return new FieldPath(`${this.text}[${k}]`);
  }

  toString(): string {
    return this.text;
  }
}

const typeLabels: Record<FieldErrorType, string> = {
  Required: "Required value",
  Invalid: "Invalid value",
  TypeInvalid: "Invalid value",
  Duplicate: "Duplicate value",
  NotSupported: "Unsupported value",
  NotFound: "Not found",
  Forbidden: "Forbidden",
  TooMany: "Too many",
  TooLong: "Too long",
};

/** Types whose message shows the bad value after the label. */
const showsValue = new Set<FieldErrorType>([
  "Invalid",
  "TypeInvalid",
  "Duplicate",
  "NotSupported",
  "NotFound",
]);

function formatValue(v: unknown): string {
  if (typeof v === "string") return JSON.stringify(v);
  if (v === null) return "null";
  if (typeof v === "number" || typeof v === "boolean" || typeof v === "bigint") return String(v);
  if (Array.isArray(v)) return "array";
  if (typeof v === "object") return "object";
  return typeof v;
}

/** Formats an error the way kubectl prints it: `field: Label: value: detail`. */
export function formatFieldError(e: FieldError): string {
  let out = e.field === "" ? typeLabels[e.type] : `${e.field}: ${typeLabels[e.type]}`;
  if (showsValue.has(e.type) && e.badValue !== undefined) out += `: ${formatValue(e.badValue)}`;
  if (e.detail) out += `: ${e.detail}`;
  return out;
}

export function required(field: PathLike, detail?: string): FieldError {
  return { type: "Required", field: String(field), ...(detail ? { detail } : {}) };
}

export function invalid(field: PathLike, badValue: unknown, detail: string): FieldError {
  return { type: "Invalid", field: String(field), badValue, detail };
}

export function duplicate(field: PathLike, badValue: unknown): FieldError {
  return { type: "Duplicate", field: String(field), badValue };
}

export function notFound(field: PathLike, badValue: unknown): FieldError {
  return { type: "NotFound", field: String(field), badValue };
}

export function forbidden(field: PathLike, detail: string): FieldError {
  return { type: "Forbidden", field: String(field), detail };
}

export function notSupported(
  field: PathLike,
  badValue: unknown,
  supported: readonly string[],
): FieldError {
  const detail = `supported values: ${supported.map((s) => JSON.stringify(s)).join(", ")}`;
  return { type: "NotSupported", field: String(field), badValue, detail };
}

export function tooMany(field: PathLike, actual: number, max: number): FieldError {
  return {
    type: "TooMany",
    field: String(field),
    detail: `${actual}: must have at most ${max} items`,
  };
}

export function tooLong(field: PathLike, maxBytes: number): FieldError {
  return {
    type: "TooLong",
    field: String(field),
    detail: `may not be more than ${maxBytes} bytes`,
  };
}

/** The whole message, as kubectl prints it: `The Pod "web" is invalid: <errors>`. */
export function formatInvalidObject(kind: string, name: string, errors: FieldError[]): string {
  const head = `The ${kind} ${JSON.stringify(name)} is invalid: `;
  if (errors.length === 1 && errors[0]) return head + formatFieldError(errors[0]);
  return head + errors.map((e) => `\n* ${formatFieldError(e)}`).join("");
}

/**
 * The API server's 422 for an object that failed validation: the message kubectl prints, and
 * one cause per field error (`FieldValueRequired`, `spec.x`, "Required value").
 */
export function invalidObjectError(
  kind: string,
  name: string,
  errors: FieldError[],
  group?: string,
): StatusError {
  return new StatusError("Invalid", formatInvalidObject(kind, name, errors), {
    name,
    kind,
    ...(group !== undefined && group !== "" && { group }),
    causes: errors.map((e) => ({
      reason: `FieldValue${e.type}`,
      message: formatFieldError({ ...e, field: "" }),
      field: e.field,
    })),
  });
}
