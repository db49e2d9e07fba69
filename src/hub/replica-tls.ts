// The replicas' serving certificate kept in step through the store (docs/hub-replicas.md, "The
// store"): at each check a replica takes the pair in `hub_identity` when it lasts longer than its
// own, renews its own from the shared CA when it nears its end (ownTls), and writes a renewed
// pair back, only over the one it read (`UPDATE … WHERE serving_cert = <read>`): when another
// replica renewed first, its pair is taken instead, so every replica ends serving one pair.
import { X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { SecretSealer } from "./deploy/sealing.ts";
import { connectPostgres } from "./pg/connect.ts";
import { storedServing, storeServing } from "./replica-identity.ts";
import { ownTls, writeServing } from "./tls/index.ts";
import type { RenewedTls } from "./tls/renew.ts";

export interface ReplicaTlsOptions {
  /** postgres://USER@HOST:PORT/DB */
  url: string;
  sealer: SecretSealer;
  dataDir: string;
  sans: string[];
  servingLifetimeMs?: number;
}

/** When the certificate `pem` ends (ms); -Infinity when it does not parse. */
function endOf(pem: string | undefined): number {
  if (pem === undefined) return Number.NEGATIVE_INFINITY;
  try {
    return Date.parse(new X509Certificate(pem).validTo);
  } catch {
    return Number.NEGATIVE_INFINITY;
  }
}

function readLocal(dataDir: string): string | undefined {
  try {
    return readFileSync(join(dataDir, "tls", "serving.crt"), "utf8");
  } catch {
    return undefined;
  }
}

/** The replica's check of its serving certificate (TlsRenewalDeps.renew) through the store;
 * `renewed` when it differs from the one served so far (`<dataDir>/tls`'s when this is made). */
export function replicaRenewTls(o: ReplicaTlsOptions): (now: number) => Promise<RenewedTls> {
  let served = readLocal(o.dataDir);
  const own = (now: number) => ownTls(o.dataDir, o.sans, now, o.servingLifetimeMs);
  return async (now) => {
    const sql = await connectPostgres(o.url, { max: 1 });
    try {
      const stored = await storedServing(sql, o.sealer);
      if (endOf(stored.cert) > endOf(readLocal(o.dataDir))) writeServing(o.dataDir, stored);
      let tls = own(now);
      const mine = endOf(tls.cert) > endOf(stored.cert);
      if (mine && !(await storeServing(sql, o.sealer, { cert: tls.cert, key: tls.key }, stored))) {
        // Another replica wrote its renewal first: serve that one.
        writeServing(o.dataDir, await storedServing(sql, o.sealer));
        tls = own(now);
      }
      const renewed = tls.cert !== served;
      served = tls.cert;
      return { ...tls, renewed };
    } finally {
      await sql.close();
    }
  };
}
