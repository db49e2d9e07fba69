// Kubernetes Status bodies for refused API requests (the agent's local API and the hub), and the
// response helpers around them.

export type StatusReason =
  | "BadRequest"
  | "Unauthorized"
  | "Forbidden"
  | "NotFound"
  | "MethodNotAllowed"
  | "AlreadyExists"
  | "Conflict"
  | "Invalid"
  | "Gone"
  | "UnsupportedMediaType"
  | "TooManyRequests"
  | "InternalError"
  | "ServiceUnavailable"
  | "InsufficientStorage"
  | "RequestEntityTooLarge";

/** One field's problem in a 422 (Kubernetes' StatusCause). */
interface StatusCause {
  reason: string;
  message: string;
  field?: string;
}

/** What a Status says about the object it refused. */
export interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
  causes?: StatusCause[];
}

export interface Status {
  kind: "Status";
  apiVersion: "v1";
  metadata: Record<string, never>;
  status: "Failure";
  message: string;
  /** One of StatusReason for the APIs' refusals; streams and watches use others ("Expired"). */
  reason: string;
  details?: StatusDetails;
  code: number;
}

/** The one builder of a Failure Status body: an API's refusal, a watch's ERROR event, the error
 * channel of an exec that failed. */
export function failureStatus(
  reason: string,
  message: string,
  code: number,
  details?: StatusDetails,
): Status {
  const s: Status = {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message,
    reason,
    code,
  };
  if (details !== undefined) s.details = details;
  return s;
}

const codes: Record<StatusReason, number> = {
  BadRequest: 400,
  Unauthorized: 401,
  Forbidden: 403,
  NotFound: 404,
  MethodNotAllowed: 405,
  AlreadyExists: 409,
  Conflict: 409,
  Invalid: 422,
  Gone: 410,
  UnsupportedMediaType: 415,
  TooManyRequests: 429,
  InternalError: 500,
  ServiceUnavailable: 503,
  InsufficientStorage: 507,
  RequestEntityTooLarge: 413,
};

/** A request the server refuses; thrown inside handlers and turned into a Status response. */
export class StatusError extends Error {
  constructor(
    readonly reason: StatusReason,
    message: string,
    readonly details?: StatusDetails,
  ) {
    super(message);
    this.name = "StatusError";
  }

  get code(): number {
    return codes[this.reason];
  }

  toStatus(): Status {
    return failureStatus(this.reason, this.message, this.code, this.details);
  }

  toResponse(): Response {
    return json(this.toStatus(), this.code);
  }
}

export function json(body: unknown, status = 200): Response {
  return new Response(`${JSON.stringify(body)}\n`, {
    status,
    headers: { "content-type": "application/json" },
  });
}

/** True when `body` is a Kubernetes Status object (as the client receives it). */
export function isStatus(body: unknown): body is Status {
  return (
    typeof body === "object" &&
    body !== null &&
    (body as { kind?: unknown }).kind === "Status" &&
    typeof (body as { message?: unknown }).message === "string"
  );
}
