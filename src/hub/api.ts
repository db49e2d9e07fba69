// The hub's HTTP API (docs/protocol.md, "What the hub serves"): the join exchange for agents and
// the operator API. Every operator route needs the operator token; refusals are v1 Status bodies.

import { parseDuration } from "../api/duration.ts";
import { isQualifiedName, isValidLabelValue } from "../api/index.ts";
import { json, StatusError } from "../api/status.ts";
import {
  describeZodError,
  JOIN_PATH,
  JOIN_TOKENS_PATH,
  type JoinTokenInfo,
  type JoinTokenList,
  joinRequestSchema,
  joinTokenRequestSchema,
} from "../protocol/index.ts";
import { HUB_CA_PATH, joinTokenWithHash } from "../protocol/trust.ts";
import { StreamFailure } from "../streams/types.ts";
import type { Clock } from "../util/clock.ts";
import type { AuditLog, AuditRecord, AuditStart } from "./audit.ts";
import { handleDeployApi } from "./deploy/api.ts";
import type { Deployer } from "./deploy/deployer.ts";
import type { Fleet } from "./fleet.ts";
import { decodeSegment, readJson } from "./http.ts";
import type { Identity } from "./identity.ts";
import type { KubeApi } from "./kube/index.ts";
import type { ReplicaStreams } from "./relay/replica.ts";
import { handleReleases, isReleasePath, type ReleaseApiDeps } from "./releases/api.ts";
import { handleAgentRolloutApi } from "./rollouts/api.ts";
import type { AgentRollouts } from "./rollouts/index.ts";
import { storeWriteStatus } from "./store.ts";
import { bearerToken } from "./tokens.ts";
import { handleUpdateApi } from "./updates/api.ts";
import type { NodeUpdates } from "./updates/updates.ts";
import { rfc3339 } from "./views.ts";

export interface ApiDeps {
  fleet: Fleet;
  /** The hub's CA (served at /api/v1/hub-ca, its hash put into join tokens), when it has one. */
  ca?: { pem: string; hash?: string | undefined };
  identity: Identity;
  deployer: Deployer;
  clock: Clock;
  /** Closes the live connection of a node just revoked. */
  revoked(name: string): void;
  /** Limit on a request body, in bytes. */
  maxBodyBytes: number;
  /** The Kubernetes API (kube/): resources at their paths. */
  kube: KubeApi;
  /** Every exec and port-forward (GET /api/v1/audit). */
  audit: AuditLog;
  /** The agent releases (releases/api.ts). */
  releases: Pick<ReleaseApiDeps, "releases" | "log">;
  /** Per-node agent updates (updates/api.ts); `changed` offers a node's to its agent. */
  updates: { updates: NodeUpdates; changed(node: string): void };
  /** The agent rollouts (rollouts/api.ts). */
  agentRollouts: AgentRollouts;
  /** Hub replicas: asks the replica holding a node what only it holds (relay/replica.ts). */
  holder?: Pick<ReplicaStreams, "ask">;
}

const DEFAULT_JOIN_TTL_MS = 24 * 3_600_000;

function parseWith<T>(
  schema: {
    safeParse(
      v: unknown,
    ): { success: true; data: T } | { success: false; error: import("zod").ZodError };
  },
  body: unknown,
  what: string,
): T {
  const r = schema.safeParse(body);
  if (!r.success) throw new StatusError("BadRequest", `bad ${what}: ${describeZodError(r.error)}`);
  return r.data;
}

async function join(deps: ApiDeps, req: Request): Promise<Response> {
  if (req.method !== "POST")
    throw new StatusError(
      "MethodNotAllowed",
      `${req.method} ${JOIN_PATH} is not allowed; use POST`,
    );
  const body = parseWith(joinRequestSchema, await readJson(req, deps.maxBodyBytes), "join request");
  return json(await deps.identity.join(body, deps.clock.now()));
}

async function createJoinToken(deps: ApiDeps, req: Request): Promise<Response> {
  const body = parseWith(
    joinTokenRequestSchema,
    await readJson(req, deps.maxBodyBytes),
    "join token request",
  );
  let ttlMs = DEFAULT_JOIN_TTL_MS;
  if (body.ttl !== undefined) {
    try {
      ttlMs = parseDuration(body.ttl);
    } catch (err) {
      throw new StatusError(
        "BadRequest",
        `invalid ttl ${JSON.stringify(body.ttl)}: ${(err as Error).message}`,
      );
    }
    if (ttlMs <= 0)
      throw new StatusError(
        "BadRequest",
        `invalid ttl ${JSON.stringify(body.ttl)}: must be positive`,
      );
  }
  const created = await deps.identity.createJoinToken(
    ttlMs,
    body.labels ?? {},
    deps.clock.now(),
    body.uses,
  );
  return json({ ...created, token: joinTokenWithHash(created.token, deps.ca?.hash) }, 201);
}

/** GET /api/v1/join-tokens: every join token (with replicas, as the store holds them now). */
async function listJoinTokens(deps: ApiDeps): Promise<Response> {
  const items: JoinTokenInfo[] = (await deps.identity.listJoinTokens()).map((t) => ({
    id: t.id,
    createdAt: rfc3339(t.createdAt),
    expiresAt: rfc3339(t.expiresAt),
    labels: t.labels,
    ...(t.maxUses !== undefined && { uses: t.maxUses }),
    used: t.used,
    revoked: t.revoked,
  }));
  const list: JoinTokenList = { apiVersion: "fleetlet.io/v1", kind: "JoinTokenList", items };
  return json(list);
}

/**
 * PATCH /api/v1/nodes/NAME with `{"metadata": {"labels": {"k": "v", "gone": null}}}` (a JSON
 * merge patch): sets and removes the hub's labels of the node; its pods follow at once.
 */
export async function patchNodeLabels(
  deps: ApiDeps,
  req: Request,
  name: string,
): Promise<Response> {
  const rec = deps.fleet.nodes.get(name);
  if (rec === undefined) throw new StatusError("NotFound", `nodes "${name}" not found`);
  const body = (await readJson(req, deps.maxBodyBytes)) as {
    metadata?: { labels?: Record<string, unknown> };
  } | null;
  const patch = body?.metadata?.labels;
  if (patch === undefined || patch === null || typeof patch !== "object" || Array.isArray(patch))
    throw new StatusError(
      "BadRequest",
      'the hub patches node labels only: {"metadata": {"labels": {...}}}',
    );
  const labels = { ...rec.hubLabels };
  const reported = rec.node?.metadata.labels ?? {};
  for (const [k, v] of Object.entries(patch)) {
    const keyErrors = isQualifiedName(k);
    if (keyErrors.length > 0)
      throw new StatusError(
        "Invalid",
        `metadata.labels: Invalid value: ${JSON.stringify(k)}: ${keyErrors.join("; ")}`,
      );
    if (v === null) {
      if (labels[k] === undefined && reported[k] !== undefined)
        throw new StatusError(
          "Forbidden",
          `label "${k}" of node "${name}" is set by the device itself (its nodeLabels); it cannot be removed from the hub`,
        );
      delete labels[k];
      continue;
    }
    if (typeof v !== "string")
      throw new StatusError("BadRequest", `label "${k}": the value must be a string or null`);
    const valueErrors = isValidLabelValue(v);
    if (valueErrors.length > 0)
      throw new StatusError(
        "Invalid",
        `metadata.labels[${k}]: Invalid value: ${JSON.stringify(v)}: ${valueErrors.join("; ")}`,
      );
    labels[k] = v;
  }
  await deps.fleet.setHubLabels(name, labels);
  await deps.deployer.reconcile();
  return json(deps.fleet.view(name));
}

/** DELETE /api/v1/nodes/NAME (or POST .../revoke): the credential is refused from now on. */
export async function revokeNode(deps: ApiDeps, name: string): Promise<Response> {
  await deps.identity.revokeNode(name, deps.clock.now());
  deps.revoked(name);
  return json(deps.fleet.view(name));
}

/** GET /api/v1/nodes/NAME/health: the history this hub holds, or (hub replicas) the one the
 * replica holding the node holds; a node no replica holds answers what this one has. */
async function nodeHealth(deps: ApiDeps, name: string): Promise<Response> {
  if (deps.fleet.view(name) === undefined)
    throw new StatusError("NotFound", `node "${name}" not found`);
  if (deps.holder === undefined || deps.fleet.holds(name) || !deps.fleet.isOnline(name))
    return json(deps.fleet.health.view(name));
  try {
    return json((await deps.holder.ask(name, "health")) ?? deps.fleet.health.view(name));
  } catch (err) {
    if (err instanceof StreamFailure)
      throw new StatusError(
        "ServiceUnavailable",
        `the health of node "${name}" is held by the hub replica its agent is connected to: ${err.message}`,
      );
    throw err;
  }
}

/** POST /api/v1/nodes/NAME/revoke|forget, GET /api/v1/nodes/NAME/health. */
async function nodeAction(
  deps: ApiDeps,
  req: Request,
  name: string,
  action: string,
): Promise<Response> {
  if (req.method === "GET" && action === "health") return nodeHealth(deps, name);
  if (req.method === "POST" && action === "revoke") return revokeNode(deps, name);
  if (req.method === "POST" && action === "forget") {
    deps.identity.releaseRevoked(name);
    await deps.updates.updates.forget(name);
    return json(await deps.fleet.forget(name));
  }
  throw new StatusError(
    "MethodNotAllowed",
    `${req.method} ${new URL(req.url).pathname} is not allowed`,
  );
}

/** Operator routes; the caller has checked the operator token; `client`: for the audit log. */
async function operatorRoute(
  deps: ApiDeps,
  req: Request,
  url: URL,
  client: string,
): Promise<Response> {
  const path = url.pathname.replace(/\/+$/, "");
  const update = await handleUpdateApi(
    {
      ...deps.updates,
      rolloutOf: (n) => deps.agentRollouts.rolloutOf(n),
      maxBodyBytes: deps.maxBodyBytes,
      audit: (r, action, node, release, outcome) =>
        deps.audit.record({ ...auditEntry(r, client, "update", action, release), node }, outcome),
    },
    req,
    path,
  );
  if (update !== undefined) return update;
  const rollout = await handleAgentRolloutApi(
    {
      rollouts: deps.agentRollouts,
      maxBodyBytes: deps.maxBodyBytes,
      audit: (r, action, name, release, outcome) =>
        deps.audit.record(
          { ...auditEntry(r, client, "agentrollout", action, release), rollout: name },
          outcome,
        ),
    },
    req,
    path,
  );
  if (rollout !== undefined) return rollout;
  const _q = url.searchParams;
  if (path === JOIN_TOKENS_PATH && req.method === "POST") return createJoinToken(deps, req);
  if (path === JOIN_TOKENS_PATH && req.method === "GET") return listJoinTokens(deps);
  const tok = /^\/api\/v1\/join-tokens\/([^/]+)$/.exec(path);
  if (tok !== null && req.method === "DELETE") {
    const id = decodeSegment(tok[1] ?? "");
    if (!(await deps.identity.revokeJoinToken(id)))
      throw new StatusError("NotFound", `join token "${id}" not found`);
    return json({ id, revoked: true });
  }
  if (path === "/api/v1/audit" && req.method === "GET") return auditList(deps, url);
  const kube = await deps.kube.handle(req, url);
  if (kube !== undefined) return kube;
  const deploy = await handleDeployApi(deps.deployer, req, path);
  if (deploy !== undefined) return deploy;
  const node = /^\/api\/v1\/nodes\/([^/]+)\/([^/]+)$/.exec(path);
  if (node !== null) return nodeAction(deps, req, decodeSegment(node[1] ?? ""), node[2] ?? "");
  throw new StatusError("NotFound", `the hub serves no ${req.method} ${path}`);
}

/** GET /api/v1/audit?node=&limit=: the most recent exec and port-forward sessions. */
async function auditList(deps: ApiDeps, url: URL): Promise<Response> {
  const q = url.searchParams;
  const limit = Number(q.get("limit") ?? 100);
  if (!Number.isSafeInteger(limit) || limit < 1)
    throw new StatusError("BadRequest", `invalid limit ${JSON.stringify(q.get("limit"))}`);
  const node = q.get("node") ?? undefined;
  const items = await deps.audit.list({ limit, ...(node !== undefined && { node }) });
  return json({ apiVersion: "fleetlet.io/v1", kind: "AuditRecordList", items });
}

/** GET /api/v1/hub-ca: the hub's CA as PEM, for devices that verify it with a join token's hash. */
function hubCa(deps: ApiDeps): Response {
  if (deps.ca === undefined)
    throw new StatusError("NotFound", "this hub has no CA of its own (it was given a certificate)");
  return new Response(deps.ca.pem, { headers: { "content-type": "application/x-pem-file" } });
}

/**
 * Refuses a request without the operator token: 401 without a token (or an unknown one), 403 for
 * a device's own credential (a device speaks only for itself, over its connection).
 */
export function operatorOnly(deps: Pick<ApiDeps, "identity">, req: Request, url: URL): void {
  const token = bearerToken(req.headers.get("authorization"));
  if (deps.identity.isOperator(token)) return;
  const device = deps.identity.authenticate(token);
  if (device.ok)
    throw new StatusError(
      "Forbidden",
      `the credential of node "${device.nodeName}" cannot use the operator API (${req.method} ${url.pathname}): a device speaks only for itself, over its connection`,
    );
  throw new StatusError(
    "Unauthorized",
    "a valid operator token is required (Authorization: Bearer)",
  );
}

/** An audit entry of the operator's release or update action `action` on `release`. */
function auditEntry(
  req: Request,
  client: string,
  kind: AuditRecord["kind"],
  action: NonNullable<AuditRecord["action"]>,
  release: string,
): AuditStart {
  const userAgent = req.headers.get("user-agent") ?? "";
  return {
    kind,
    user: "operator",
    client,
    userAgent,
    node: "",
    namespace: "",
    pod: "",
    action,
    release,
  };
}

/** The release routes, which devices may read too (their own authentication); `client` is the
 * caller's address, for the audit log. */
function releaseRoute(deps: ApiDeps, req: Request, url: URL, client: string): Promise<Response> {
  return handleReleases(
    {
      ...deps.releases,
      identity: deps.identity,
      operatorOnly: (r, u) => operatorOnly(deps, r, u),
      audit: (r, action, release, outcome) =>
        deps.audit.record(auditEntry(r, client, "release", action, release), outcome),
      stored: (version) => {
        for (const node of deps.updates.updates.nodesWanting(version)) deps.updates.changed(node);
      },
    },
    req,
    url,
  );
}

/** Handles an HTTP request that is not a WebSocket upgrade; `client`: the caller's address. */
export async function handleApi(deps: ApiDeps, req: Request, client = ""): Promise<Response> {
  const url = new URL(req.url);
  try {
    if (url.pathname === JOIN_PATH) return await join(deps, req);
    if (url.pathname === HUB_CA_PATH && req.method === "GET") return hubCa(deps);
    if (isReleasePath(url.pathname)) return await releaseRoute(deps, req, url, client);
    operatorOnly(deps, req, url);
    return await operatorRoute(deps, req, url, client);
  } catch (err) {
    if (err instanceof StatusError) return err.toResponse();
    const unstored = storeWriteStatus(err, `${req.method} ${url.pathname}`);
    if (unstored !== undefined) return unstored.toResponse();
    return new StatusError(
      "InternalError",
      `${req.method} ${url.pathname} failed: ${(err as Error).message}`,
    ).toResponse();
  }
}
