// How a device trusts the hub (docs/protocol.md, "TLS and trust"): the CA hash, and join tokens
// that carry it after their secret (`flj_…:sha256:<hex>`).
import { createHash, X509Certificate } from "node:crypto";

export const HUB_CA_PATH = "/api/v1/hub-ca";
/** Where the agent keeps the hub's CA it verified with the join token, under its root dir. */
export const SAVED_CA_FILE = "hub/ca.crt";

const HASH = /^sha256:[0-9a-f]{64}$/;

/** `sha256:<hex>` of the DER SubjectPublicKeyInfo of the (first) certificate in `pem`. */
export function caHash(pem: string): string {
  const spki = new X509Certificate(pem).publicKey.export({ type: "spki", format: "der" });
  return `sha256:${createHash("sha256").update(spki).digest("hex")}`;
}

/** A join token split into its secret (what the hub hashes) and the CA hash it may carry. */
export function parseJoinToken(token: string): { secret: string; caHash?: string } {
  const i = token.indexOf(":sha256:");
  if (i < 0) return { secret: token };
  const hash = token.slice(i + 1).toLowerCase();
  return HASH.test(hash) ? { secret: token.slice(0, i), caHash: hash } : { secret: token };
}

/** The join token a device is given: the secret, then the CA hash when there is a CA. */
export function joinTokenWithHash(secret: string, hash: string | undefined): string {
  return hash === undefined ? secret : `${secret}:${hash}`;
}
