// The hub store's contract (test/lib/store-contract.ts) against SQLite, on a file per test.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SqliteHubStore } from "../../../src/hub/store-sqlite.ts";
import { storeContract } from "../../lib/store-contract.ts";

storeContract("SQLite", async () => {
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-store-"));
  return {
    open: async () => new SqliteHubStore(join(dir, "hub.db")),
    remove: async () => rmSync(dir, { recursive: true, force: true }),
  };
});
