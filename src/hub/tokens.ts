// Tokens of the hub (docs/protocol.md, "Identities and tokens"): 32 random bytes in base64url
// behind a prefix saying what the token is for. The hub keeps only SHA-256 hashes.
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { TOKEN_PREFIX } from "../protocol/index.ts";
import type { JoinTokenRecord } from "./store.ts";
import { rfc3339 } from "./views.ts";

export type TokenKind = keyof typeof TOKEN_PREFIX;

/** A new random token of `kind`, e.g. "flj_3q...". `random` is injectable for tests. */
export function generateToken(
  kind: TokenKind,
  random: (n: number) => Buffer = randomBytes,
): string {
  return TOKEN_PREFIX[kind] + random(32).toString("base64url");
}

/** The hex SHA-256 of a token: what the hub stores and looks tokens up by. */
export function hashToken(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}

/**
 * Whether two hex hashes are equal, in time that does not depend on where they differ
 * (crypto.timingSafeEqual over the digests; hashes of different lengths are unequal).
 */
export function sameHash(a: string, b: string): boolean {
  const x = Buffer.from(a, "hex");
  const y = Buffer.from(b, "hex");
  return x.length === y.length && x.length > 0 && timingSafeEqual(x, y);
}

/** A short public id for a join token (the first 12 hex chars of its hash). */
export function tokenId(hash: string): string {
  return hash.slice(0, 12);
}

/** The bearer token of an `Authorization: Bearer <token>` header, or undefined. */
export function bearerToken(header: string | null | undefined): string | undefined {
  if (header === null || header === undefined) return undefined;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m?.[1];
}

/** Why join token `token` may not be used at `now` (unknown, revoked, expired or used up), or
 * undefined when it may: the check of a join, made again by a shared store in the transaction
 * that counts the use. */
export function joinTokenRefusal(
  token: JoinTokenRecord | undefined,
  now: number,
): string | undefined {
  if (token === undefined) return "unknown join token";
  if (token.revoked) return "join token revoked";
  if (token.expiresAt <= now) return `join token expired at ${rfc3339(token.expiresAt)}`;
  if (token.maxUses !== undefined && token.used >= token.maxUses)
    return `join token ${token.id} was already used: it allowed ${token.maxUses} join${token.maxUses === 1 ? "" : "s"}`;
  return undefined;
}
