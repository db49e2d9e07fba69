// A nats-server of our own on 127.0.0.1 (Debian's package nats-server), for tests and for the
// development cluster: a free port the first time, the same port after restart(), its log in a
// temporary folder that stop() removes.
//   const nats = await startNatsServer();  nats.url  await nats.restart()  await nats.stop()
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Subprocess } from "bun";

export interface NatsServer {
  /** nats://127.0.0.1:PORT */
  readonly url: string;
  readonly port: number;
  /** The server's log (in the temporary folder). */
  readonly logFile: string;
  /** Stops the server (SIGTERM, then SIGKILL after 5 s), waits `downMs` (default 0), and starts
   * it again on the same port. */
  restart(opts?: { downMs?: number }): Promise<void>;
  /** Stops the server and removes its folder. */
  stop(): Promise<void>;
}

const BINARY = "nats-server";
const READY_TIMEOUT_MS = 10_000;

/** Starts nats-server on 127.0.0.1 (a free port unless `port` is given) and waits until it
 * accepts connections. Fails, saying so, when nats-server is not installed. */
export async function startNatsServer(opts: { port?: number } = {}): Promise<NatsServer> {
  if (Bun.which(BINARY) === null)
    throw new Error(`${BINARY} is not installed (Debian: apt-get install nats-server)`);
  const dir = await mkdtemp(join(tmpdir(), "fleetlet-nats-"));
  const logFile = join(dir, "nats.log");
  let proc = await launch(dir, logFile, opts.port ?? -1);
  const port = await readPort(dir, proc, logFile);
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    logFile,
    async restart({ downMs = 0 } = {}) {
      await terminate(proc);
      await Bun.sleep(downMs);
      proc = await launch(dir, logFile, port);
      await readPort(dir, proc, logFile);
    },
    async stop() {
      await terminate(proc);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

async function launch(dir: string, logFile: string, port: number): Promise<Subprocess> {
  // The ports file of an earlier run would be read as this one's.
  for (const f of await readdir(dir)) if (f.endsWith(".ports")) await rm(join(dir, f));
  return Bun.spawn(
    [BINARY, "-a", "127.0.0.1", "-p", String(port), "--ports_file_dir", dir, "-l", logFile],
    { stdio: ["ignore", "ignore", "ignore"] },
  );
}

/** The client port from the ports file nats-server writes once it listens. */
async function readPort(dir: string, proc: Subprocess, logFile: string): Promise<number> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) {
      const log = await readFile(logFile, "utf8").catch(() => "");
      throw new Error(`${BINARY} exited with ${proc.exitCode}: ${log.trim().slice(-500)}`);
    }
    const file = (await readdir(dir)).find((f) => f.endsWith(".ports"));
    if (file !== undefined) {
      const text = await readFile(join(dir, file), "utf8");
      let hostPort: string | undefined;
      try {
        hostPort = (JSON.parse(text) as { nats?: string[] }).nats?.[0];
      } catch {
        // written but not whole yet: read it again
      }
      if (hostPort !== undefined) return Number(hostPort.slice(hostPort.lastIndexOf(":") + 1));
    }
    await Bun.sleep(20);
  }
  await terminate(proc);
  throw new Error(`${BINARY} did not listen within ${READY_TIMEOUT_MS} ms (log: ${logFile})`);
}

async function terminate(proc: Subprocess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  proc.kill("SIGTERM");
  const killer = setTimeout(() => proc.kill("SIGKILL"), 5_000);
  await proc.exited;
  clearTimeout(killer);
}
