// The replicas' serving certificate renewed through the store (src/hub/replica-tls.ts) on a real
// PostgreSQL (scripts/lib/postgres.ts; needs root and Debian's postgresql): a replica that renews
// its certificate near its end writes it to `hub_identity`, and another replica's next check
// serves that pair; two replicas renewing at once end serving one pair.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomBytes, X509Certificate } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SQL } from "bun";
import { PostgresCluster } from "../../scripts/lib/postgres.ts";
import { SecretSealer } from "../../src/hub/deploy/sealing.ts";
import { sharedReplicaIdentity, storedServing } from "../../src/hub/replica-identity.ts";
import { replicaRenewTls } from "../../src/hub/replica-tls.ts";
import { newOwnTls, writeOwnTls } from "../../src/hub/tls/index.ts";

let cluster: PostgresCluster;
const dirs: string[] = [];

beforeAll(async () => {
  cluster = await PostgresCluster.start();
}, 60_000);
afterAll(async () => {
  await cluster?.remove();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const SANS = ["127.0.0.1", "hub.example"];
const LIFETIME = 90_000;

test("a renewal at one replica is served by the others; two renewing at once end with one pair", async () => {
  const url = await cluster.createDatabase();
  const sealer = new SecretSealer([randomBytes(32)]);
  const t0 = Date.UTC(2026, 0, 1);
  const make = () => ({ tls: newOwnTls(SANS, t0, LIFETIME), operatorToken: "flo_x" });
  const shared = await sharedReplicaIdentity(url, sealer, make, t0);
  const replicas = ["a", "b"].map(() => {
    const dataDir = mkdtempSync(join(tmpdir(), "fleetlet-replica-tls-"));
    dirs.push(dataDir);
    writeOwnTls(dataDir, shared.tls);
    return replicaRenewTls({ url, sealer, dataDir, sans: SANS, servingLifetimeMs: LIFETIME });
  }) as [ReturnType<typeof replicaRenewTls>, ReturnType<typeof replicaRenewTls>];
  const [a, b] = replicas;
  const sql = new SQL(url, { max: 1 });
  try {
    // Well within its life: nothing to do.
    expect((await a(t0 + 10_000)).renewed).toBe(false);
    expect((await b(t0 + 10_000)).renewed).toBe(false);
    // In its last third: a renews it and stores it; b serves a's.
    const byA = await a(t0 + 70_000);
    expect(byA.renewed).toBe(true);
    expect(byA.cert).not.toBe(shared.tls.servingCert);
    expect(new X509Certificate(byA.cert).checkIssued(new X509Certificate(shared.tls.caCert))).toBe(
      true,
    );
    expect((await storedServing(sql, sealer)).cert).toBe(byA.cert);
    const byB = await b(t0 + 71_000);
    expect(byB).toMatchObject({ renewed: true, cert: byA.cert, key: byA.key });
    expect((await b(t0 + 72_000)).renewed).toBe(false);
    // Both near the end of that one at once: they end serving the one pair the store holds.
    const [x, y] = await Promise.all([a(t0 + 140_000), b(t0 + 140_000)]);
    const stored = await storedServing(sql, sealer);
    expect(x.cert).toBe(stored.cert);
    expect(y.cert).toBe(stored.cert);
    expect(stored.cert).not.toBe(byA.cert);
  } finally {
    await sql.close();
  }
});
