// What every replica of a hub on PostgreSQL shares (docs/hub-replicas.md, "The store"): the
// hub's own CA, its serving certificate and the operator token, in one row of `hub_identity`.
// The first replica makes them in one transaction (INSERT … ON CONFLICT DO NOTHING, then read
// back), so replicas starting at once on an empty database all end with the same ones. The
// private keys and the token are sealed with the secrets key (deploy/sealing.ts); the store also
// holds the token's hash as a single hub does (meta 'operator'), which the hub's identity loads.
import type { SQL } from "bun";
import type { SecretSealer } from "./deploy/sealing.ts";
import { connectPostgres } from "./pg/connect.ts";
import type { OwnTlsFiles } from "./tls/index.ts";
import { hashToken } from "./tokens.ts";

export interface ReplicaIdentity {
  tls: OwnTlsFiles;
  operatorToken: string;
}

/** What a sealed value of `hub_identity` is bound to: no Secret's "namespace/name" has no slash,
 * so a sealed Secret moved here does not open. */
const binding = (column: string) => `hub_identity:${column}`;

const SELECT_IDENTITY =
  "SELECT ca_cert, ca_key, serving_cert, serving_key, operator_token FROM hub_identity WHERE id = 1";

interface Row {
  ca_cert: string;
  ca_key: string;
  serving_cert: string;
  serving_key: string;
  operator_token: string;
}

/**
 * The replicas' shared identity in the database at `url` (migrated first): the one stored, or
 * `make()`'s when there is none yet (called only then: a new CA costs key generation). Throws
 * SealError when the stored one does not open with `sealer`'s keys (a replica given another
 * secrets key file).
 */
export async function sharedReplicaIdentity(
  url: string,
  sealer: SecretSealer,
  make: () => ReplicaIdentity,
  now: number,
): Promise<ReplicaIdentity> {
  const sql = await connectPostgres(url, { max: 1 });
  try {
    const row = await sql.begin(async (tx) => {
      const had = (await tx.unsafe(SELECT_IDENTITY)) as Row[];
      if (had[0] !== undefined) return had[0];
      // None yet: made here, and kept unless another replica's was stored first.
      const mine = make();
      await tx.unsafe(
        `INSERT INTO hub_identity (id, ca_cert, ca_key, serving_cert, serving_key, operator_token,
          created_at) VALUES (1, $1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING`,
        [
          mine.tls.caCert,
          sealer.seal(mine.tls.caKey, binding("ca_key")),
          mine.tls.servingCert,
          sealer.seal(mine.tls.servingKey, binding("serving_key")),
          sealer.seal(mine.operatorToken, binding("operator_token")),
          now,
        ],
      );
      return ((await tx.unsafe(SELECT_IDENTITY)) as Row[])[0] as Row;
    });
    const stored = {
      tls: {
        caCert: row.ca_cert,
        caKey: sealer.open(row.ca_key, binding("ca_key")),
        servingCert: row.serving_cert,
        servingKey: sealer.open(row.serving_key, binding("serving_key")),
      },
      operatorToken: sealer.open(row.operator_token, binding("operator_token")),
    };
    await sql.unsafe(
      `INSERT INTO meta (key, value) VALUES ('operator', $1)
        ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
      [hashToken(stored.operatorToken)],
    );
    return stored;
  } finally {
    await sql.close();
  }
}

/** A serving certificate and its key (PEM). */
export interface ServingPair {
  cert: string;
  key: string;
}

/** The serving certificate and key every replica serves (its key opened with `sealer`). */
export async function storedServing(sql: SQL, sealer: SecretSealer): Promise<ServingPair> {
  const rows = (await sql.unsafe(
    "SELECT serving_cert, serving_key FROM hub_identity WHERE id = 1",
  )) as Pick<Row, "serving_cert" | "serving_key">[];
  const row = rows[0];
  if (row === undefined) throw new Error("the store holds no hub identity (hub_identity)");
  return { cert: row.serving_cert, key: sealer.open(row.serving_key, binding("serving_key")) };
}

/** Stores `pair` for every replica in place of `read` (the pair read before): false, storing
 * nothing, when another replica stored one meanwhile. */
export async function storeServing(
  sql: SQL,
  sealer: SecretSealer,
  pair: ServingPair,
  read: ServingPair,
): Promise<boolean> {
  const rows = await sql.unsafe(
    `UPDATE hub_identity SET serving_cert = $1, serving_key = $2
      WHERE id = 1 AND serving_cert = $3 RETURNING id`,
    [pair.cert, sealer.seal(pair.key, binding("serving_key")), read.cert],
  );
  return rows.length > 0;
}
