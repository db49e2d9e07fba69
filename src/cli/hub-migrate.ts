// `fleetlet hub migrate --from DIR --to postgres://USER@HOST:PORT/DB [--secrets-key-file F]`:
// copies a stopped single hub's data folder into an empty PostgreSQL database
// (src/hub/migrate.ts). Secrets stay sealed: read with DIR's key, written under the first key
// of --secrets-key-file (default DIR/secrets.key, which the replicas are then given). Agent
// releases are pushed again into the database (releases/copy.ts).
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadSealer, parseKeyFile, SecretSealer } from "../hub/deploy/sealing.ts";
import { copyStores, type HubSnapshot, MigrateRefused, snapshotCounts } from "../hub/migrate.ts";
import { identityOf, storeIdentity } from "../hub/migrate-identity.ts";
import { copyReleases } from "../hub/releases/copy.ts";
import { ReleaseStore } from "../hub/releases/store.ts";
import { PostgresReleaseStore } from "../hub/releases/store-postgres.ts";
import { openPostgresStores } from "../hub/stores-postgres.ts";
import { type HubStores, openSqliteStores } from "../hub/stores-sqlite.ts";
import { createLogger } from "../util/log.ts";
import { type FlagSpecs, parseArgs } from "./args.ts";
import { CliError, UsageError } from "./errors.ts";
import type { CliIO } from "./io.ts";

const MIGRATE_USAGE = `usage: fleetlet hub migrate --from DIR --to postgres://USER@HOST:PORT/DB [--secrets-key-file FILE]
Copies a single hub's data folder DIR (stop that hub first) into an empty PostgreSQL database:
devices, their credentials, join tokens, the operator token's hash, pods, events, DaemonSets,
ConfigMaps, Secrets, revisions, rollouts, node updates, agent rollouts, the audit log, the
agent releases pushed (DIR/releases, each checked against its manifest again); and
the hub's own CA and serving certificate (DIR/tls) and operator token (DIR/operator-token),
which every replica then serves with: devices and operators keep their credentials.
Secrets stay sealed: they are opened with DIR/secrets.key and sealed under the first key of
--secrets-key-file (default DIR/secrets.key); give the replicas that file.
A database that already holds a hub's data, or part of one, is refused.
`;

const migrateFlags = {
  from: { type: "string" },
  to: { type: "string" },
  "secrets-key-file": { type: "string" },
  help: { type: "boolean", short: "h" },
} as const satisfies FlagSpecs;

/** The sealer that reads DIR's Secrets (DIR's key first, so that nothing in DIR is sealed
 * again) and the one that seals them in PostgreSQL, with the file replicas must be given. */
function sealers(
  dir: string,
  keyFile: string | undefined,
): { read: SecretSealer; write: SecretSealer; file: string } {
  const own = join(dir, "secrets.key");
  const file = keyFile ?? own;
  try {
    const given = loadSealer(file, false).sealer;
    const ownKeys = file !== own && existsSync(own) ? parseKeyFile(readText(own), own) : [];
    const givenKeys = parseKeyFile(readText(file), file);
    return { read: new SecretSealer([...ownKeys, ...givenKeys]), write: given, file };
  } catch (err) {
    throw new CliError((err as Error).message);
  }
}

function readText(path: string): string {
  return readFileSync(path, "utf8");
}

/** The database of the hub's data folder `dir`; throws when there is none. */
function sourceDatabase(dir: string): string {
  const db = join(dir, "hub.db");
  if (!existsSync(dir) || !statSync(dir).isDirectory())
    throw new CliError(`--from ${dir}: no such folder`);
  if (!existsSync(db)) throw new CliError(`--from ${dir}: not a hub's data folder (no hub.db)`);
  return db;
}

/** The single hub's stores on its database `db`. */
function openSource(db: string, sealer: SecretSealer): HubStores {
  try {
    return openSqliteStores(db, sealer, createLogger({ level: "error" }));
  } catch (err) {
    throw new CliError(`--from: cannot read ${db}: ${(err as Error).message}`);
  }
}

async function openTarget(url: string, sealer: SecretSealer): Promise<TargetStores> {
  try {
    return await openPostgresStores(url, sealer, createLogger({ level: "error" }), {
      max: 2,
      connectionTimeout: 10,
      copy: true,
    });
  } catch (err) {
    throw new CliError(`--to ${redact(url)}: ${(err as Error).message}`);
  }
}

/** `url` without its password. */
function redact(url: string): string {
  return url.replace(/^(postgres(?:ql)?:\/\/[^:@/]*):[^@/]*@/, "$1:***@");
}

type TargetStores = Awaited<ReturnType<typeof openPostgresStores>>;

/** Copies the agent releases of `<from>/releases` (when there are any) into the target's
 * database, received and compressed in a temp folder first. */
async function copyReleasesOf(from: string, target: TargetStores): Promise<void> {
  const folder = join(from, "releases");
  if (!existsSync(folder)) return;
  const incoming = mkdtempSync(join(tmpdir(), "fleetlet-migrate-"));
  try {
    const to = new PostgresReleaseStore(target.pool, incoming, Number.MAX_SAFE_INTEGER);
    await copyReleases(new ReleaseStore(folder, Number.MAX_SAFE_INTEGER), to);
  } finally {
    rmSync(incoming, { recursive: true, force: true });
  }
}

/** copyStores() with the hub's CA and operator token (migrate-identity.ts) and its releases,
 * its failures said. */
async function copy(
  source: HubStores,
  target: TargetStores,
  o: { from: string; to: string; sealer: SecretSealer },
  io: CliIO,
): Promise<HubSnapshot> {
  const now = io.now();
  let mine: ReturnType<typeof identityOf> | undefined;
  const check = (x: HubSnapshot) => {
    try {
      mine = identityOf(o.from, x.fleet.operatorHash, now);
    } catch (err) {
      throw new CliError(`--from ${o.from}: ${(err as Error).message}`);
    }
  };
  const beforeLast = async () => {
    await copyReleasesOf(o.from, target);
    if (mine !== undefined) await storeIdentity(o.to, o.sealer, mine.identity, now);
  };
  try {
    const copied = await copyStores(source, target, { check, beforeLast });
    if (mine?.ownCa === false)
      io.stderr(
        `${o.from} has no CA of its own (the hub served with --tls-cert or plain HTTP): the replicas' CA was made now\n`,
      );
    return copied;
  } catch (err) {
    if (err instanceof CliError) throw err;
    if (err instanceof MigrateRefused) throw new CliError(`--to ${redact(o.to)}: ${err.message}`);
    throw new CliError(
      `the copy into ${redact(o.to)} failed: ${(err as Error).message}; drop the database, create it again and run migrate again`,
    );
  }
}

/** `fleetlet hub migrate ...`: returns the exit code. */
export async function hubMigrateCommand(argv: string[], io: CliIO): Promise<number> {
  const { flags, positionals } = parseArgs(argv, migrateFlags);
  if (flags.help) {
    io.stdout(MIGRATE_USAGE);
    return 0;
  }
  const { from, to } = flags;
  if (from === undefined || to === undefined || positionals.length > 0)
    throw new UsageError(`hub migrate takes --from DIR and --to URL\n${MIGRATE_USAGE}`);
  if (!/^postgres(ql)?:\/\//.test(to))
    throw new UsageError(
      `invalid --to ${JSON.stringify(redact(to))}: want postgres://USER@HOST:PORT/DB`,
    );
  const db = sourceDatabase(from);
  const keys = sealers(from, flags["secrets-key-file"]);
  const source = openSource(db, keys.read);
  try {
    const target = await openTarget(to, keys.write);
    try {
      const copied = await copy(source, target, { from, to, sealer: keys.write }, io);
      const counts = Object.entries(snapshotCounts(copied)).map(([k, n]) => `${k} ${n}`);
      io.stdout(`copied ${from} into ${redact(to)}: ${counts.join(", ")}\n`);
      io.stdout(
        `Secrets are sealed under ${keys.file}: give the replicas that file (--secrets-key-file)\n`,
      );
      return 0;
    } finally {
      await target.hub.close();
    }
  } finally {
    await source.hub.close();
  }
}
