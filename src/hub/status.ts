// Kubernetes Status bodies for the hub's refusals, and the response helpers around them.

export type HubStatusReason =
  | "BadRequest"
  | "Unauthorized"
  | "Forbidden"
  | "NotFound"
  | "MethodNotAllowed"
  | "AlreadyExists"
  | "InternalError";

const codes: Record<HubStatusReason, number> = {
  BadRequest: 400,
  Unauthorized: 401,
  Forbidden: 403,
  NotFound: 404,
  MethodNotAllowed: 405,
  AlreadyExists: 409,
  InternalError: 500,
};

/** A request the hub refuses; thrown in handlers and turned into a Status response. */
export class HubStatusError extends Error {
  constructor(
    readonly reason: HubStatusReason,
    message: string,
  ) {
    super(message);
    this.name = "HubStatusError";
  }

  get code(): number {
    return codes[this.reason];
  }

  toResponse(): Response {
    const body = {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: this.message,
      reason: this.reason,
      code: this.code,
    };
    return json(body, this.code);
  }
}

export function json(body: unknown, status = 200): Response {
  return new Response(`${JSON.stringify(body)}\n`, {
    status,
    headers: { "content-type": "application/json" },
  });
}
