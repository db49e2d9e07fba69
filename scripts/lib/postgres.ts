// A throwaway PostgreSQL cluster for tests and the hub's development scripts: Debian's binaries
// (the `postgresql` package; /usr/lib/postgresql/<version>/bin) run as the `postgres` user, since
// initdb refuses root, in a temporary folder of its own, listening on 127.0.0.1 on a free port with
// its unix socket in that folder, trusting every loopback connection. Each caller takes a fresh
// database of its own; remove() stops the server and deletes the folder. Needs root.

import { spawnSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { SQL } from "bun";

export interface PostgresOptions {
  /** Debian's PostgreSQL major version; default 15 (Debian 12's). */
  version?: number;
  /** Durable writes (fsync); default off, as a test's data is thrown away. */
  fsync?: boolean;
}

/** The `postgres` user's uid and gid, from /etc/passwd. */
function postgresUser(): { uid: number; gid: number } {
  const line = readFileSync("/etc/passwd", "utf8")
    .split("\n")
    .find((l) => l.startsWith("postgres:"));
  const [, , uid, gid] = line?.split(":") ?? [];
  if (uid === undefined || gid === undefined)
    throw new Error(
      "There is no user `postgres`: install Debian's postgresql package (scripts/setup)",
    );
  return { uid: Number(uid), gid: Number(gid) };
}

/** A loopback port that nothing listened on a moment ago. */
function freePort(): number {
  const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = s.port;
  s.stop(true);
  return port;
}

export class PostgresCluster {
  private databases = 0;
  private running = false;
  private readonly onExit = () => this.stopSync();

  private constructor(
    /** The cluster's folder: data/, the server's log and its unix socket. */
    readonly dir: string,
    private readonly bin: string,
  ) {}

  /** The loopback port the server listens on. */
  port = 0;

  /** Makes and starts a new cluster. */
  static async start(o: PostgresOptions = {}): Promise<PostgresCluster> {
    if (process.getuid?.() !== 0) throw new Error("A test PostgreSQL cluster needs root");
    const bin = `/usr/lib/postgresql/${o.version ?? 15}/bin`;
    if (!existsSync(join(bin, "initdb")))
      throw new Error(`${bin}/initdb is missing: install Debian's postgresql (scripts/setup)`);
    const { uid, gid } = postgresUser();
    // In /tmp, not $TMPDIR: `postgres` must reach it, and the socket's path must stay short.
    const dir = mkdtempSync("/tmp/fleetlet-pg-");
    chownSync(dir, uid, gid);
    const c = new PostgresCluster(dir, bin);
    try {
      const initdb = ["-D", c.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C"];
      c.run("initdb", [...initdb, "--no-sync"]);
      writeFileSync(join(c.data, "postgresql.conf"), "include 'conf.d.conf'\n", { flag: "a" });
      // Another process may take the free port before the server binds it: then another port.
      for (let attempt = 1; ; attempt++) {
        c.port = freePort();
        const conf = [
          "listen_addresses = '127.0.0.1'",
          `port = ${c.port}`,
          `unix_socket_directories = '${dir}'`,
          `fsync = ${o.fsync === true ? "on" : "off"}`,
          "max_connections = 200",
        ];
        writeFileSync(join(c.data, "conf.d.conf"), `${conf.join("\n")}\n`);
        try {
          await c.startServer();
          return c;
        } catch (err) {
          if (attempt === 3) throw err;
        }
      }
    } catch (err) {
      await c.remove();
      throw err;
    }
  }

  private get data(): string {
    return join(this.dir, "data");
  }

  /** Runs one of the cluster's binaries as `postgres`; throws with its output when it fails. */
  private run(tool: string, args: string[]): void {
    const r = spawnSync("runuser", ["-u", "postgres", "--", join(this.bin, tool), ...args], {
      encoding: "utf8",
      cwd: this.dir,
    });
    if (r.status !== 0)
      throw new Error(
        `${tool} ${args.join(" ")} failed (${r.error?.message ?? `exit ${r.status}`}): ${r.stderr}${r.stdout}`,
      );
  }

  /** The URL of database `db` as the superuser `postgres` over loopback TCP. */
  url(db = "postgres"): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${db}`;
  }

  /** Makes a new, empty database and gives its URL. */
  async createDatabase(prefix = "fleetlet"): Promise<string> {
    const name = `${prefix}_${process.pid}_${++this.databases}`;
    const admin = new SQL(this.url(), { max: 1 });
    try {
      await admin.unsafe(`CREATE DATABASE "${name}"`);
    } finally {
      await admin.close();
    }
    return this.url(name);
  }

  /** Drops the database at `url` (made by createDatabase()), ending its sessions. */
  async dropDatabase(url: string): Promise<void> {
    const name = new URL(url).pathname.slice(1);
    const admin = new SQL(this.url(), { max: 1 });
    try {
      await admin.unsafe(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    } finally {
      await admin.close();
    }
  }

  /** Starts the server again after stopServer(), on the same port and data (running: nothing). */
  async startServer(): Promise<void> {
    if (this.running) return;
    const log = join(this.dir, "server.log");
    try {
      this.run("pg_ctl", ["-D", this.data, "-l", log, "-w", "-t", "30", "start"]);
    } catch (err) {
      const tail = existsSync(log) ? readFileSync(log, "utf8").split("\n").slice(-15) : [];
      throw new Error(`${(err as Error).message}\nThe server's log ends:\n${tail.join("\n")}`);
    }
    this.running = true;
    process.on("exit", this.onExit);
  }

  /** Stops the server (fast shutdown: open sessions are ended), keeping its data. */
  async stopServer(): Promise<void> {
    if (!this.running) return;
    this.run("pg_ctl", ["-D", this.data, "-m", "fast", "-w", "stop"]);
    this.running = false;
    process.off("exit", this.onExit);
  }

  /** Stops at once when the process exits without remove(). */
  private stopSync(): void {
    const pgCtl = join(this.bin, "pg_ctl");
    spawnSync("runuser", [
      "-u",
      "postgres",
      "--",
      pgCtl,
      "-D",
      this.data,
      "-m",
      "immediate",
      "stop",
    ]);
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** Stops the server and deletes everything of the cluster. */
  async remove(): Promise<void> {
    try {
      await this.stopServer();
    } finally {
      rmSync(this.dir, { recursive: true, force: true });
    }
  }
}
