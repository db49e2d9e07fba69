// The deploy store's contract (test/lib/deploy-store-contract.ts) against SQLite, on a file per
// test, its Secrets sealed.
import { randomBytes } from "node:crypto";
import { SecretSealer } from "../../../src/hub/deploy/sealing.ts";
import { SqliteDeployStore } from "../../../src/hub/deploy/store-sqlite.ts";
import { deployStoreContract } from "../../lib/deploy-store-contract.ts";
import { sqliteBacking } from "../../lib/sqlite-backing.ts";

deployStoreContract("SQLite", async () => {
  const sealer = new SecretSealer([randomBytes(32)]);
  return sqliteBacking((db) => new SqliteDeployStore(db, sealer));
});
