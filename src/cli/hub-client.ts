// The hub client the operator's commands share: where the hub is (URL, operator token, CA) and
// calls to its API, a refusal turned into the hub's message.
import { readFileSync } from "node:fs";
import { CliError, UsageError } from "./errors.ts";
import type { CliIO } from "./io.ts";

/** Where the operator's commands reach the hub: its URL, the operator token, and the CA to
 * verify an HTTPS hub with (absent: the system's roots). */
export interface HubTarget {
  url: string;
  token: string;
  ca?: string;
}

/** The hub URL, the operator token (--token or FLEETLET_HUB_TOKEN) and the hub's CA (--ca-file
 * or FLEETLET_HUB_CA, a PEM file) from flags and environment. */
export function hubTarget(
  flags: { hub?: string; token?: string; "ca-file"?: string },
  io: CliIO,
): HubTarget {
  if (flags.hub === undefined) throw new UsageError("--hub URL is required");
  const token = flags.token ?? io.env.FLEETLET_HUB_TOKEN;
  if (token === undefined || token === "")
    throw new UsageError("an operator token is required: --token T or FLEETLET_HUB_TOKEN");
  const caFile = flags["ca-file"] ?? io.env.FLEETLET_HUB_CA;
  const target: HubTarget = { url: flags.hub.replace(/\/+$/, ""), token };
  if (caFile !== undefined && caFile !== "") {
    try {
      target.ca = readFileSync(caFile, "utf8");
    } catch (err) {
      throw new CliError(`cannot read the hub's CA ${caFile}: ${(err as Error).message}`);
    }
  }
  return target;
}

/** fetch options verifying the hub with the target's CA. */
function hubTls(target: HubTarget): RequestInit {
  return (target.ca === undefined ? {} : { tls: { ca: target.ca } }) as RequestInit;
}

/** A hub API answer: its HTTP status, headers and parsed JSON body. */
export interface HubAnswer<T> {
  status: number;
  headers: Headers;
  body: T;
}

/** Calls the hub's API; a refusal becomes a CliError with the hub's message. */
export function hubCall<T>(
  target: HubTarget,
  method: string,
  path: string,
  body?: unknown,
): Promise<HubAnswer<T>> {
  return hubSend<T>(target, method, path, {
    headers: { "content-type": "application/json" },
    ...(body !== undefined && { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(30_000),
  });
}

/** Sends a request to the hub's API with the operator token (`init` gives the body, its headers
 * and the deadline); a refusal becomes a CliError with the hub's message. */
export async function hubSend<T>(
  target: HubTarget,
  method: string,
  path: string,
  init: RequestInit & { headers?: Record<string, string> },
): Promise<HubAnswer<T>> {
  let res: Response;
  try {
    res = await fetch(target.url + path, {
      ...init,
      method,
      headers: { ...init.headers, authorization: `Bearer ${target.token}` },
      ...hubTls(target),
    });
  } catch (err) {
    throw new CliError(`Cannot reach the hub at ${target.url}: ${(err as Error).message}`);
  }
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    // Bun's own refusal of a body over the hub's largest (a release push) has no text.
    if (res.status === 413)
      throw new CliError(
        `${method} ${path} on ${target.url}: the hub refused the request as too large (HTTP 413)`,
      );
    throw new CliError(
      `${method} ${path} on ${target.url}: HTTP ${res.status}: ${text.slice(0, 200)}`,
    );
  }
  if (!res.ok) {
    const { message, reason } = parsed as { message?: unknown; reason?: unknown };
    if (typeof message !== "string")
      throw new CliError(`hub refused ${method} ${path}: HTTP ${res.status}`);
    // As kubectl prints a refusal: the reason, then the server's message.
    throw new CliError(
      reason === "Invalid" ? message : `Error from server (${String(reason)}): ${message}`,
    );
  }
  return { status: res.status, headers: res.headers, body: parsed as T };
}

/** Calls the hub's API and returns the body (see hubCall). */
export async function hubRequest<T>(
  target: HubTarget,
  method: string,
  path: string,
  body?: unknown,
): Promise<T> {
  return (await hubCall<T>(target, method, path, body)).body;
}
