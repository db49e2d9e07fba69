// A backing (store-backing.ts) on a SQLite file of its own: each open() opens the hub's database
// there again, as a restarted hub would, and makes the store on it with `make`.
import type { Database } from "bun:sqlite";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openHubDatabase } from "../../src/hub/store-sqlite.ts";
import type { Backing } from "./store-backing.ts";

export function sqliteBacking<S>(make: (db: Database) => S): Backing<S> {
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-store-"));
  const opened: Database[] = [];
  return {
    open: async () => {
      const db = openHubDatabase(join(dir, "hub.db"));
      opened.push(db);
      return make(db);
    },
    remove: async () => {
      for (const db of opened) db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
