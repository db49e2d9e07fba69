// What `fleetlet hub migrate` copies beside the stores (docs/hub-replicas.md, "Migration from
// one hub"): the single hub's own CA and serving certificate (DIR/tls) and its operator token
// (DIR/operator-token) become the replicas' shared identity (replica-identity.ts), so devices
// that trust the hub's CA keep trusting the replicas, and the operator's token keeps working.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { SecretSealer } from "./deploy/sealing.ts";
import { type ReplicaIdentity, sharedReplicaIdentity } from "./replica-identity.ts";
import { defaultSans, newOwnTls, type OwnTlsFiles } from "./tls/index.ts";
import { hashToken } from "./tokens.ts";

const TLS_FILES = {
  caCert: "ca.crt",
  caKey: "ca.key",
  servingCert: "serving.crt",
  servingKey: "serving.key",
} as const;

/** The hub's own CA and serving certificate in `dir`/tls, or undefined when it has none (it
 * served with --tls-cert or plain HTTP). */
function ownTlsOf(dir: string): OwnTlsFiles | undefined {
  const paths = Object.entries(TLS_FILES).map(([k, f]) => [k, join(dir, "tls", f)] as const);
  if (!paths.every(([, p]) => existsSync(p))) return undefined;
  return Object.fromEntries(paths.map(([k, p]) => [k, readFileSync(p, "utf8")])) as never;
}

/** The identity the replicas will share, from the data folder `dir` of a hub whose operator
 * token's stored hash is `operatorHash`; throws saying what is missing or does not match. */
export function identityOf(
  dir: string,
  operatorHash: string | undefined,
  now: number,
): { identity: ReplicaIdentity; ownCa: boolean } {
  const file = join(dir, "operator-token");
  if (!existsSync(file))
    throw new Error(
      `${file} is missing: the replicas need the operator token itself (the hub stores only its hash)`,
    );
  const operatorToken = readFileSync(file, "utf8").trim();
  if (operatorHash !== undefined && hashToken(operatorToken) !== operatorHash)
    throw new Error(`${file} is not the token whose hash the hub stores`);
  const tls = ownTlsOf(dir);
  return {
    identity: { tls: tls ?? newOwnTls(defaultSans("", []), now), operatorToken },
    ownCa: tls !== undefined,
  };
}

/** Stores `identity` as the replicas' shared one in the database at `url`; throws when the
 * database already held another. */
export async function storeIdentity(
  url: string,
  sealer: SecretSealer,
  identity: ReplicaIdentity,
  now: number,
): Promise<void> {
  const stored = await sharedReplicaIdentity(url, sealer, () => identity, now);
  if (stored.tls.caCert !== identity.tls.caCert || stored.operatorToken !== identity.operatorToken)
    throw new Error("the database already holds the identity of another hub's replicas");
}
