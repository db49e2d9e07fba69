// Secrets at rest: the sealer (AES-256-GCM under the key file's first key, bound to the Secret's
// name) and the deploy store that seals Secrets, seals again what was plain or sealed with an
// older key, and refuses to open a body it cannot.
import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  isSealed,
  loadSealer,
  parseKeyFile,
  SealError,
  SecretSealer,
} from "../../../src/hub/deploy/sealing.ts";
import type { StoredObject } from "../../../src/hub/deploy/store.ts";
import { SqliteDeployStore } from "../../../src/hub/deploy/store-sqlite.ts";
import { openHubDatabase } from "../../../src/hub/store-sqlite.ts";
import { openSqliteStores } from "../../../src/hub/stores-sqlite.ts";
import { createLogger } from "../../../src/util/log.ts";

const key = () => randomBytes(32);
const quiet = createLogger({ level: "error" });

function secret(name: string, value: string): StoredObject {
  return {
    kind: "Secret",
    namespace: "default",
    name,
    object: { kind: "Secret", metadata: { name }, data: { password: btoa(value) } },
  };
}

function configMap(name: string, value: string): StoredObject {
  return {
    kind: "ConfigMap",
    namespace: "default",
    name,
    object: { kind: "ConfigMap", metadata: { name }, data: { k: value } },
  };
}

function bodies(db: Database): { kind: string; name: string; body: string }[] {
  return db.query("SELECT kind, name, body FROM objects ORDER BY name").all() as {
    kind: string;
    name: string;
    body: string;
  }[];
}

function newDb(): Database {
  const db = new Database(":memory:");
  db.exec("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)");
  return db;
}

describe("SecretSealer", () => {
  test("seals and opens; the sealed text shows nothing of the plain one and differs each time", () => {
    const s = new SecretSealer([key()]);
    const text = JSON.stringify({ data: { password: "hunter2-very-secret" } });
    const a = s.seal(text, "default/db");
    const b = s.seal(text, "default/db");
    expect(isSealed(a)).toBe(true);
    expect(a).not.toContain("hunter2");
    expect(a).not.toBe(b);
    expect(s.open(a, "default/db")).toBe(text);
    expect(s.keyIdOf(a)).toBe(s.sealingKeyId);
  });

  test("a body does not open for another Secret, nor once a byte of it changed", () => {
    const s = new SecretSealer([key()]);
    const sealed = s.seal("{}", "default/db");
    expect(() => s.open(sealed, "default/other")).toThrow(SealError);
    const raw = Buffer.from(sealed.slice(sealed.lastIndexOf(":") + 1), "base64");
    raw[raw.length - 20] = (raw[raw.length - 20] ?? 0) ^ 1;
    const changed = `${sealed.slice(0, sealed.lastIndexOf(":") + 1)}${raw.toString("base64")}`;
    expect(() => s.open(changed, "default/db")).toThrow(/was changed, or belongs to another/);
  });

  test("a body sealed with a key the file does not hold names both", () => {
    const old = new SecretSealer([key()]);
    const sealed = old.seal("{}", "default/db");
    const other = new SecretSealer([key()]);
    expect(() => other.open(sealed, "default/db")).toThrow(
      new RegExp(`sealed with key ${old.sealingKeyId}.*holds ${other.sealingKeyId}`),
    );
  });

  test("a rotated file (new key first) seals with the new key and opens the old key's bodies", () => {
    const [oldKey, newKey] = [key(), key()];
    const sealed = new SecretSealer([oldKey]).seal("{}", "default/db");
    const rotated = new SecretSealer([newKey, oldKey]);
    expect(rotated.open(sealed, "default/db")).toBe("{}");
    expect(rotated.keyIdOf(rotated.seal("{}", "default/db"))).toBe(rotated.sealingKeyId);
    expect(rotated.keyIdOf(sealed)).not.toBe(rotated.sealingKeyId);
  });

  test("a plain body (stored before sealing) is returned as it is", () => {
    expect(new SecretSealer([key()]).open('{"a":1}', "default/db")).toBe('{"a":1}');
  });
});

describe("the secrets key file", () => {
  test("keys a line in base64, comments and blank lines allowed; a bad line is named", () => {
    const [a, b] = [key(), key()];
    const text = `# fleetlet hub secrets\n${a.toString("base64")}\n\n${b.toString("base64")}\n`;
    expect(parseKeyFile(text, "k")).toEqual([a, b]);
    expect(() => parseKeyFile(`${a.toString("base64")}\nnot-a-key\n`, "/k")).toThrow(
      "secrets key file /k, line 2: want 32 bytes in base64",
    );
    expect(() => parseKeyFile(`${randomBytes(16).toString("base64")}\n`, "/k")).toThrow(/line 1/);
    expect(() => parseKeyFile("# nothing\n", "/k")).toThrow("holds no key");
  });

  test("the default file is made once, readable by its owner only; a named file must exist", () => {
    const dir = mkdtempSync(join(tmpdir(), "fleetlet-sealing-"));
    const path = join(dir, "secrets.key");
    const first = loadSealer(path, true);
    expect(first.created).toBe(true);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const again = loadSealer(path, true);
    expect(again.created).toBe(false);
    expect(again.sealer.open(first.sealer.seal("x", "n/s"), "n/s")).toBe("x");
    expect(readFileSync(path, "utf8").trim()).toHaveLength(44);
    expect(() => loadSealer(join(dir, "missing.key"), false)).toThrow("does not exist");
  });
});

describe("the deploy store with a sealer", () => {
  test("Secrets are stored sealed and load whole; ConfigMaps stay plain", async () => {
    const db = newDb();
    const sealer = new SecretSealer([key()]);
    const store = new SqliteDeployStore(db, sealer);
    await store.putObject(secret("db", "hunter2-at-rest"), 1);
    await store.putObject(configMap("cfg", "plain-value"), 2);
    const [cfg, db1] = bodies(db);
    expect(isSealed(db1?.body ?? "")).toBe(true);
    expect(db1?.body).not.toContain(btoa("hunter2-at-rest"));
    expect(cfg?.body).toContain("plain-value");
    const loaded = (await new SqliteDeployStore(db, sealer).load()).objects;
    expect(loaded.find((o) => o.name === "db")?.object).toEqual(
      secret("db", "hunter2-at-rest").object,
    );
  });

  test("plain Secrets and those of an older key are sealed again with the sealing key, once", async () => {
    const db = newDb();
    const oldKey = key();
    await new SqliteDeployStore(db).putObject(secret("plain", "p"), 1);
    await new SqliteDeployStore(db, new SecretSealer([oldKey])).putObject(secret("old", "o"), 2);
    await new SqliteDeployStore(db).putObject(configMap("cfg", "c"), 3);
    const rotated = new SecretSealer([key(), oldKey]);
    const store = new SqliteDeployStore(db, rotated);
    expect(store.sealSecrets()).toBe(2);
    expect(store.sealSecrets()).toBe(0);
    for (const row of bodies(db).filter((r) => r.kind === "Secret"))
      expect(rotated.keyIdOf(row.body)).toBe(rotated.sealingKeyId);
    const byName = new Map((await store.load()).objects.map((o) => [o.name, o.object]));
    expect(byName.get("plain")).toEqual(secret("plain", "p").object);
    expect(byName.get("old")).toEqual(secret("old", "o").object);
  });

  test("a Secret whose key is gone keeps the hub from starting, its database closed, and nothing is rewritten", async () => {
    const path = join(mkdtempSync(join(tmpdir(), "fleetlet-sealing-")), "hub.db");
    const db = openHubDatabase(path);
    db.exec("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)");
    await new SqliteDeployStore(db, new SecretSealer([key()])).putObject(secret("db", "x"), 1);
    await new SqliteDeployStore(db).putObject(secret("plain", "p"), 2);
    const before = bodies(db);
    db.close();
    expect(existsSync(`${path}-wal`)).toBe(false);
    expect(() => openSqliteStores(path, new SecretSealer([key()]), quiet)).toThrow(SealError);
    // Closed: the last connection to a database in WAL mode removes its write-ahead log.
    expect(existsSync(`${path}-wal`)).toBe(false);
    const again = openHubDatabase(path);
    expect(bodies(again)).toEqual(before);
    again.close();
  });
});

test("a key file written by hand with Windows line ends still reads", () => {
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-sealing-"));
  const path = join(dir, "k");
  const k = key();
  writeFileSync(path, `${k.toString("base64")}\r\n`);
  expect(loadSealer(path, false).sealer.sealingKeyId).toBe(new SecretSealer([k]).sealingKeyId);
});

test("sealing what was plain leaves no copy of it in the database's files, overflow pages too", async () => {
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-sealing-"));
  const path = join(dir, "hub.db");
  const db = new Database(path, { create: true });
  db.exec(
    "PRAGMA journal_mode = WAL; CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
  );
  // Large enough to spill into overflow pages, which an update frees rather than rewrites.
  const marker = "plain-secret-marker-7f3a9c";
  const value = `${"x".repeat(20_000)}${marker}`;
  const tail = btoa(value).slice(-32);
  await new SqliteDeployStore(db).putObject(secret("db", value), 1);
  db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  const onDisk = () =>
    ["hub.db", "hub.db-wal"]
      .map((f) => {
        try {
          return readFileSync(join(dir, f)).toString("latin1");
        } catch {
          return "";
        }
      })
      .join("");
  expect(onDisk()).toContain(tail);
  expect(new SqliteDeployStore(db, new SecretSealer([key()])).sealSecrets()).toBe(1);
  expect(onDisk()).not.toContain(tail);
  db.close();
  expect(onDisk()).not.toContain(tail);
});
