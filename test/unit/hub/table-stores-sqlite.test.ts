// The contracts of the node updates', agent rollouts' and audit log's stores
// (test/lib/update-store-contract.ts, rollout-store-contract.ts, audit-store-contract.ts)
// against SQLite, on a file per test.
import { SqliteAuditStore } from "../../../src/hub/audit-sqlite.ts";
import { SqliteAgentRolloutStore } from "../../../src/hub/rollouts/store-sqlite.ts";
import { SqliteUpdateStore } from "../../../src/hub/updates/store-sqlite.ts";
import { auditStoreContract } from "../../lib/audit-store-contract.ts";
import { rolloutStoreContract } from "../../lib/rollout-store-contract.ts";
import { sqliteBacking } from "../../lib/sqlite-backing.ts";
import { updateStoreContract } from "../../lib/update-store-contract.ts";

updateStoreContract("SQLite", async () => sqliteBacking((db) => new SqliteUpdateStore(db)));
rolloutStoreContract("SQLite", async () => sqliteBacking((db) => new SqliteAgentRolloutStore(db)));
auditStoreContract("SQLite", async () => sqliteBacking((db) => new SqliteAuditStore(db)));
