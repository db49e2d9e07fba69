// Who may talk to the hub: the operator token, join tokens, and per-node credentials
// (docs/protocol.md, "Identities and tokens", "Joining"). Only hashes are kept. Refusals are
// StatusErrors with a message that says what failed.
import { isDNS1123Subdomain } from "../api/index.ts";
import { StatusError } from "../api/status.ts";
import type { JoinRequest, JoinTokenResponse } from "../protocol/index.ts";
import { parseJoinToken } from "../protocol/trust.ts";
import type { HubStore, JoinTokenRecord, LoadedState, NodeRecord } from "./store.ts";
import { generateToken, hashToken, tokenId } from "./tokens.ts";

export interface IdentityDeps {
  store: HubStore;
  /** The fleet's node records (shared with Fleet). */
  nodes: Map<string, NodeRecord>;
  newToken?: typeof generateToken;
}

function rfc3339(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
}

export class Identity {
  private operatorHash: string | undefined;
  private readonly joinTokens = new Map<string, JoinTokenRecord>();
  private readonly credentials = new Map<string, string>();
  private readonly newToken: typeof generateToken;

  constructor(
    private readonly deps: IdentityDeps,
    loaded: LoadedState,
  ) {
    this.operatorHash = loaded.operatorHash;
    for (const t of loaded.joinTokens) this.joinTokens.set(t.hash, t);
    for (const n of loaded.nodes) this.credentials.set(n.credentialHash, n.name);
    this.newToken = deps.newToken ?? generateToken;
  }

  /** Creates the operator token if there is none; returns it only when it was just created. */
  ensureOperatorToken(): string | undefined {
    if (this.operatorHash !== undefined) return undefined;
    const token = this.newToken("operator");
    this.operatorHash = hashToken(token);
    this.deps.store.saveOperatorHash(this.operatorHash);
    return token;
  }

  isOperator(token: string | undefined): boolean {
    return (
      token !== undefined &&
      this.operatorHash !== undefined &&
      hashToken(token) === this.operatorHash
    );
  }

  createJoinToken(ttlMs: number, labels: Record<string, string>, now: number): JoinTokenResponse {
    const token = this.newToken("join");
    const hash = hashToken(token);
    const rec: JoinTokenRecord = {
      id: tokenId(hash),
      hash,
      expiresAt: now + ttlMs,
      labels,
      revoked: false,
      createdAt: now,
    };
    this.deps.store.saveJoinToken(rec);
    this.joinTokens.set(hash, rec);
    return { id: rec.id, token, expiresAt: rfc3339(rec.expiresAt), labels };
  }

  /** Revokes the join token with public id `id`; false when there is none. */
  revokeJoinToken(id: string): boolean {
    for (const rec of this.joinTokens.values()) {
      if (rec.id !== id) continue;
      rec.revoked = true;
      this.deps.store.saveJoinToken(rec);
      return true;
    }
    return false;
  }

  /** Exchanges a join token for a new node credential (see the refusal table in the doc). */
  join(req: JoinRequest, now: number): { nodeName: string; credential: string } {
    const nameErrors = isDNS1123Subdomain(req.nodeName);
    if (nameErrors.length > 0)
      throw new StatusError(
        "BadRequest",
        `invalid node name ${JSON.stringify(req.nodeName)}: ${nameErrors.join("; ")}`,
      );
    const token = this.joinTokens.get(hashToken(parseJoinToken(req.joinToken).secret));
    if (token === undefined) throw new StatusError("Unauthorized", "unknown join token");
    if (token.revoked) throw new StatusError("Unauthorized", "join token revoked");
    if (token.expiresAt <= now)
      throw new StatusError("Unauthorized", `join token expired at ${rfc3339(token.expiresAt)}`);
    const existing = this.deps.nodes.get(req.nodeName);
    if (existing?.revokedAt !== undefined)
      throw new StatusError("Forbidden", `node "${req.nodeName}" was revoked`);
    if (existing?.connected === true)
      throw new StatusError("AlreadyExists", `node "${req.nodeName}" already joined`);
    const credential = this.newToken("credential");
    const rec: NodeRecord = {
      name: req.nodeName,
      credentialHash: hashToken(credential),
      hubLabels: { ...token.labels, ...req.labels },
      joinedAt: now,
      ackedSeq: 0,
      connected: false,
      desiredGeneration: 0,
      ackedGeneration: 0,
    };
    if (existing !== undefined) this.credentials.delete(existing.credentialHash);
    this.deps.store.saveNodeNow(rec);
    this.deps.nodes.set(rec.name, rec);
    this.credentials.set(rec.credentialHash, rec.name);
    return { nodeName: rec.name, credential };
  }

  /**
   * The node a credential speaks for, or why it is refused: `unauthorized` (missing or unknown)
   * or `revoked`.
   */
  authenticate(
    credential: string | undefined,
  ):
    | { ok: true; nodeName: string }
    | { ok: false; code: "unauthorized" | "revoked"; reason: string } {
    if (credential === undefined)
      return {
        ok: false,
        code: "unauthorized",
        reason: "no node credential (Authorization: Bearer)",
      };
    const name = this.credentials.get(hashToken(credential));
    const rec = name === undefined ? undefined : this.deps.nodes.get(name);
    if (rec === undefined)
      return { ok: false, code: "unauthorized", reason: "unknown node credential" };
    if (rec.revokedAt !== undefined)
      return { ok: false, code: "revoked", reason: `node "${rec.name}" was revoked` };
    return { ok: true, nodeName: rec.name };
  }

  /**
   * Lets go of revoked node `name`'s credential, so that the fleet may forget the node and its
   * name may join again; refuses a node that is not revoked.
   */
  releaseRevoked(name: string): void {
    const rec = this.deps.nodes.get(name);
    if (rec === undefined) throw new StatusError("NotFound", `nodes "${name}" not found`);
    if (rec.revokedAt === undefined)
      throw new StatusError("Conflict", `node "${name}" is not revoked; revoke it first`);
    this.credentials.delete(rec.credentialHash);
  }

  /** Revokes node `name`: its credential is refused from now on. */
  revokeNode(name: string, now: number): NodeRecord {
    const rec = this.deps.nodes.get(name);
    if (rec === undefined) throw new StatusError("NotFound", `nodes "${name}" not found`);
    if (rec.revokedAt === undefined) {
      rec.revokedAt = now;
      const { node: _node, ...progress } = rec;
      this.deps.store.saveNodeNow(progress);
    }
    return rec;
  }
}
