// Who may talk to the hub: the operator token, join tokens, and per-node credentials
// (docs/protocol.md, "Identities and tokens", "Joining", "Rotating the node credential"). Only
// hashes are kept. Refusals are StatusErrors with a message that says what failed.
// Invariants: `credentials` maps the hash of every node's current credential, and of its pending
// one when it has one, to the node's name; a node credential is refused once it expired; the
// operator token is compared in constant time; join tokens and credentials are found by their
// SHA-256 (a lookup by a hash of the secret tells a timing attacker nothing about the secret).
import { isDNS1123Subdomain } from "../api/index.ts";
import { StatusError } from "../api/status.ts";
import type { JoinRequest, JoinTokenResponse } from "../protocol/index.ts";
import { parseJoinToken } from "../protocol/trust.ts";
import { labelStamp } from "./node-sessions.ts";
import type {
  CredentialRecord,
  HubStore,
  JoinTokenRecord,
  LoadedState,
  NodeRecord,
} from "./store.ts";
import { generateToken, hashToken, joinTokenRefusal, sameHash, tokenId } from "./tokens.ts";

export interface IdentityDeps {
  store: HubStore;
  /** The fleet's node records (shared with Fleet). */
  nodes: Map<string, NodeRecord>;
  newToken?: typeof generateToken;
  /** How long a node credential is valid (default DEFAULT_CREDENTIAL_LIFETIME_MS). */
  credentialLifetimeMs?: number;
  /** The hub's time, for callers of authenticate() that give none (default Date.now). */
  now?: () => number;
}

/** The default lifetime of a node credential: 90 days. */
const DEFAULT_CREDENTIAL_LIFETIME_MS = 90 * 86_400_000;
/** The agent is asked to renew its credential once this much of its lifetime has passed. */
const RENEW_AFTER_FRACTION = 2 / 3;

/** A credential's expiry and when its agent should ask for the next (welcome, credential). */
export interface CredentialTimes {
  expiresAt: string;
  renewInMs: number;
}

/** Why a credential is refused, or whose it is. */
export type Authentication =
  | { ok: true; nodeName: string }
  | { ok: false; code: "unauthorized" | "revoked"; reason: string };

function rfc3339(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
}

export class Identity {
  private operatorHash: string | undefined;
  private readonly joinTokens = new Map<string, JoinTokenRecord>();
  private readonly credentials = new Map<string, string>();
  private readonly newToken: typeof generateToken;
  private readonly lifetimeMs: number;
  /** The tail of the identity writes: one at a time, so that a write decides on what the ones
   * before it stored (two joins of one name or one single-use token cannot both pass). */
  private writes: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly deps: IdentityDeps,
    loaded: LoadedState,
  ) {
    this.operatorHash = loaded.operatorHash;
    for (const t of loaded.joinTokens) this.joinTokens.set(t.hash, t);
    for (const n of loaded.nodes) {
      this.credentials.set(n.credentialHash, n.name);
      if (n.pendingCredential !== undefined) this.credentials.set(n.pendingCredential.hash, n.name);
    }
    this.newToken = deps.newToken ?? generateToken;
    this.lifetimeMs = deps.credentialLifetimeMs ?? DEFAULT_CREDENTIAL_LIFETIME_MS;
  }

  /** Runs `write` after the identity writes before it. */
  private serial<T>(write: () => Promise<T>): Promise<T> {
    const done = this.writes.then(write);
    this.writes = done.catch(() => {});
    return done;
  }

  /** Gives every node stored before credentials had a lifetime one from `now` (migration). */
  async adoptLegacy(now: number): Promise<void> {
    for (const rec of this.deps.nodes.values()) {
      if (rec.credentialExpiresAt !== undefined) continue;
      rec.credentialIssuedAt = now;
      rec.credentialExpiresAt = now + this.lifetimeMs;
      await this.saveNow(rec);
    }
  }

  /** Creates the operator token if there is none; returns it only when it was just created. */
  async ensureOperatorToken(): Promise<string | undefined> {
    if (this.operatorHash !== undefined) return undefined;
    const token = this.newToken("operator");
    const hash = hashToken(token);
    await this.deps.store.saveOperatorHash(hash);
    this.operatorHash = hash;
    return token;
  }

  /** Whether `token` is the operator token (compared in constant time). */
  isOperator(token: string | undefined): boolean {
    if (token === undefined || this.operatorHash === undefined) return false;
    return sameHash(hashToken(token), this.operatorHash);
  }

  /** A new join token valid `ttlMs` from `now`, for `maxUses` joins (absent: any number). */
  createJoinToken(
    ttlMs: number,
    labels: Record<string, string>,
    now: number,
    maxUses?: number,
  ): Promise<JoinTokenResponse> {
    return this.serial(() => this.newJoinToken(ttlMs, labels, now, maxUses));
  }

  private async newJoinToken(
    ttlMs: number,
    labels: Record<string, string>,
    now: number,
    maxUses?: number,
  ): Promise<JoinTokenResponse> {
    const token = this.newToken("join");
    const hash = hashToken(token);
    const rec: JoinTokenRecord = {
      id: tokenId(hash),
      hash,
      expiresAt: now + ttlMs,
      labels,
      revoked: false,
      createdAt: now,
      ...(maxUses !== undefined && { maxUses }),
      used: 0,
    };
    await this.deps.store.saveJoinToken(rec);
    this.joinTokens.set(hash, rec);
    return {
      id: rec.id,
      token,
      expiresAt: rfc3339(rec.expiresAt),
      labels,
      ...(maxUses !== undefined && { uses: maxUses }),
    };
  }

  /** Every join token, oldest first: with replicas, as the store holds them now (made, used or
   * revoked at any replica). */
  async listJoinTokens(): Promise<JoinTokenRecord[]> {
    // A store that cannot be read (PostgreSQL down): what this replica holds, as other reads.
    await this.refreshJoinTokens().catch(() => {});
    return [...this.joinTokens.values()].sort((a, b) => a.createdAt - b.createdAt);
  }

  /** Hub replicas: takes every join token as the store holds it now. */
  private async refreshJoinTokens(): Promise<void> {
    const stored = await this.deps.store.readJoinTokens?.();
    if (stored === undefined) return;
    this.joinTokens.clear();
    for (const t of stored) this.joinTokens.set(t.hash, t);
  }

  /** Revokes the join token with public id `id`; false when there is none. With replicas, a
   * token made at another replica is found in the store. */
  revokeJoinToken(id: string): Promise<boolean> {
    return this.serial(async () => {
      await this.refreshJoinTokens();
      for (const rec of this.joinTokens.values()) {
        if (rec.id !== id) continue;
        await this.deps.store.saveJoinToken({ ...rec, revoked: true });
        rec.revoked = true;
        return true;
      }
      return false;
    });
  }

  /** Exchanges a join token for a new node credential (see the refusal table in the doc). */
  join(req: JoinRequest, now: number): Promise<{ nodeName: string; credential: string }> {
    return this.serial(() => this.joinNow(req, now));
  }

  private async joinNow(
    req: JoinRequest,
    now: number,
  ): Promise<{ nodeName: string; credential: string }> {
    const nameErrors = isDNS1123Subdomain(req.nodeName);
    if (nameErrors.length > 0)
      throw new StatusError(
        "BadRequest",
        `invalid node name ${JSON.stringify(req.nodeName)}: ${nameErrors.join("; ")}`,
      );
    await this.refreshJoinToken(req.joinToken);
    const token = this.usableJoinToken(req.joinToken, now);
    const existing = this.deps.nodes.get(req.nodeName);
    if (existing?.revokedAt !== undefined)
      throw new StatusError("Forbidden", `node "${req.nodeName}" was revoked`);
    if (existing?.connected === true && !this.expired(existing, now))
      throw new StatusError("AlreadyExists", `node "${req.nodeName}" already joined`);
    const credential = this.newToken("credential");
    const cred = this.newCredential(credential, now);
    const hubLabels = { ...existing?.hubLabels, ...token.labels, ...req.labels };
    const hubLabelsAt = labelStamp(existing ?? {}, now);
    // A node whose credential expired keeps its history (streams, generations) under the new one.
    const rec: NodeRecord =
      existing?.connected === true
        ? { ...existing, hubLabels, hubLabelsAt }
        : {
            name: req.nodeName,
            credentialHash: cred.hash,
            hubLabels,
            hubLabelsAt,
            joinedAt: now,
            ackedSeq: 0,
            connected: false,
            desiredGeneration: 0,
            ackedGeneration: 0,
          };
    this.setCurrent(rec, cred);
    const { node: _node, ...progress } = rec;
    await this.deps.store.saveJoinNow({ ...token, used: token.used + 1 }, progress, now);
    token.used++;
    if (existing !== undefined) this.forgetHashes(existing);
    this.deps.nodes.set(rec.name, rec);
    this.credentials.set(rec.credentialHash, rec.name);
    return { nodeName: rec.name, credential };
  }

  /** Hub replicas: takes the join token `joinToken` names as the store holds it now (made, used
   * or revoked at another replica). Unreadable, it stays as held: the join's write says why. */
  private async refreshJoinToken(joinToken: string): Promise<void> {
    const read = this.deps.store.readJoinToken?.bind(this.deps.store);
    if (read === undefined) return;
    let hash: string;
    try {
      hash = hashToken(parseJoinToken(joinToken).secret);
    } catch {
      return; // malformed: usableJoinToken says so
    }
    const stored = await read(hash).catch(() => undefined);
    if (stored !== undefined) this.joinTokens.set(hash, stored);
  }

  /** The join token `joinToken` names, if it may be used at `now`; else why not. */
  private usableJoinToken(joinToken: string, now: number): JoinTokenRecord {
    const token = this.joinTokens.get(hashToken(parseJoinToken(joinToken).secret));
    const refused = joinTokenRefusal(token, now);
    if (token === undefined || refused !== undefined)
      throw new StatusError("Unauthorized", refused ?? "unknown join token");
    return token;
  }

  /** The node a credential speaks for at `now`, or why it is refused. Using a node's pending
   * (rotated) credential makes it the current one (queued: see promote). */
  authenticate(
    credential: string | undefined,
    now = (this.deps.now ?? Date.now)(),
  ): Authentication {
    if (credential === undefined)
      return {
        ok: false,
        code: "unauthorized",
        reason: "no node credential (Authorization: Bearer)",
      };
    const hash = hashToken(credential);
    const name = this.credentials.get(hash);
    const rec = name === undefined ? undefined : this.deps.nodes.get(name);
    if (rec === undefined)
      return { ok: false, code: "unauthorized", reason: "unknown node credential" };
    if (rec.revokedAt !== undefined)
      return { ok: false, code: "revoked", reason: `node "${rec.name}" was revoked` };
    if (rec.pendingCredential?.hash === hash) this.promote(rec);
    const expired = this.expiredReason(rec.name, now);
    if (expired !== undefined) return { ok: false, code: "unauthorized", reason: expired };
    return { ok: true, nodeName: rec.name };
  }

  /** Why node `name`'s current credential is refused at `now` when it expired; else undefined. */
  expiredReason(name: string, now: number): string | undefined {
    const expiresAt = this.deps.nodes.get(name)?.credentialExpiresAt;
    if (expiresAt === undefined || expiresAt > now) return undefined;
    return `the credential of node "${name}" expired at ${rfc3339(expiresAt)}: the device needs a new join token (remove <rootDir>/hub/credential on it and start its agent with --join-token)`;
  }

  /** The expiry of node `name`'s current credential and when its agent should renew it. */
  credentialTimes(name: string, now: number): CredentialTimes | undefined {
    const rec = this.deps.nodes.get(name);
    if (rec?.credentialExpiresAt === undefined) return undefined;
    return this.times(rec.credentialIssuedAt ?? now, rec.credentialExpiresAt, now);
  }

  /**
   * A new credential for node `name` (its agent asked over its connection), kept as the node's
   * pending one (replacing an earlier pending one) and stored before it is returned; the current
   * one keeps working until the new one is used or the current one expires.
   */
  renewCredential(name: string, now: number): Promise<{ credential: string } & CredentialTimes> {
    return this.serial(async () => {
      const rec = this.deps.nodes.get(name);
      if (rec === undefined) throw new Error(`node "${name}" is not known`);
      const credential = this.newToken("credential");
      const pending = this.newCredential(credential, now);
      const { node: _node, ...progress } = rec;
      await this.deps.store.saveNodeNow({ ...progress, pendingCredential: pending });
      if (rec.pendingCredential !== undefined) this.credentials.delete(rec.pendingCredential.hash);
      rec.pendingCredential = pending;
      this.credentials.set(pending.hash, name);
      return { credential, ...this.times(pending.issuedAt, pending.expiresAt, now) };
    });
  }

  /** The agent of `name` saved its pending credential: it becomes the only one. */
  credentialSaved(name: string): void {
    const rec = this.deps.nodes.get(name);
    if (rec?.pendingCredential !== undefined) this.promote(rec);
  }

  private newCredential(credential: string, now: number): CredentialRecord {
    return { hash: hashToken(credential), issuedAt: now, expiresAt: now + this.lifetimeMs };
  }

  private times(issuedAt: number, expiresAt: number, now: number): CredentialTimes {
    const renewAt = issuedAt + Math.floor((expiresAt - issuedAt) * RENEW_AFTER_FRACTION);
    return { expiresAt: rfc3339(expiresAt), renewInMs: Math.max(0, renewAt - now) };
  }

  /** Whether every credential of `rec` (current and pending) expired at `now`. */
  private expired(rec: NodeRecord, now: number): boolean {
    const latest = Math.max(
      rec.credentialExpiresAt ?? Infinity,
      rec.pendingCredential?.expiresAt ?? 0,
    );
    return latest <= now;
  }

  private setCurrent(rec: NodeRecord, cred: CredentialRecord): void {
    rec.credentialHash = cred.hash;
    rec.credentialIssuedAt = cred.issuedAt;
    rec.credentialExpiresAt = cred.expiresAt;
    delete rec.pendingCredential;
  }

  /**
   * Makes the pending credential of `rec` its current one and forgets the old, in memory at once
   * and in the store with the next flush: until then the store holds the credential as pending,
   * so a hub restarted before the flush promotes it again when the agent uses it.
   */
  private promote(rec: NodeRecord): void {
    const pending = rec.pendingCredential;
    if (pending === undefined) return;
    this.credentials.delete(rec.credentialHash);
    this.setCurrent(rec, pending);
    const { node: _node, ...progress } = rec;
    this.deps.store.queueProgress(progress);
  }

  /** A node's record changed as another replica stored it (`old`: the one held before, `rec`:
   * absent when the node was forgotten): its credentials are known by what is stored now. */
  nodeStored(old: NodeRecord | undefined, rec: NodeRecord | undefined): void {
    if (old !== undefined) this.forgetHashes(old);
    if (rec === undefined) return;
    this.credentials.set(rec.credentialHash, rec.name);
    if (rec.pendingCredential !== undefined)
      this.credentials.set(rec.pendingCredential.hash, rec.name);
  }

  private forgetHashes(rec: NodeRecord): void {
    this.credentials.delete(rec.credentialHash);
    if (rec.pendingCredential !== undefined) this.credentials.delete(rec.pendingCredential.hash);
  }

  private saveNow(rec: NodeRecord): Promise<void> {
    const { node: _node, ...progress } = rec;
    return this.deps.store.saveNodeNow(progress);
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
    this.forgetHashes(rec);
  }

  /** Revokes node `name`: its credential is refused from now on (once stored). */
  revokeNode(name: string, now: number): Promise<NodeRecord> {
    return this.serial(async () => {
      const rec = this.deps.nodes.get(name);
      if (rec === undefined) throw new StatusError("NotFound", `nodes "${name}" not found`);
      if (rec.revokedAt === undefined) {
        await this.saveNow({ ...rec, revokedAt: now });
        rec.revokedAt = now;
      }
      return rec;
    });
  }
}
