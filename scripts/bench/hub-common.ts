// Shared by the hub benchmarks (hub-load.ts, hub-deploy.ts): the hub as a child process with
// its output captured, waiting for a condition, RSS, percentiles, and joining many nodes.
import { readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fullJitter } from "../../src/util/backoff.ts";

export const repo = resolve(import.meta.dir, "../..");
export const bin = join(repo, "dist/fleetlet");
/** Raises the open-files limit as far as this machine allows (see ENVIRONMENT.md). */
export const ulimit = "ulimit -n 200000 2>/dev/null || ulimit -n $(ulimit -Hn)";

/** `--key value` arguments as a map. */
export function benchArgs(): Map<string, string> {
  const args = new Map<string, string>();
  for (let i = 2; i < process.argv.length; i += 2)
    args.set(process.argv[i]?.replace(/^--/, "") ?? "", process.argv[i + 1] ?? "");
  return args;
}

/** Calls `onLine` for each line of `s`. */
export async function pump(
  s: ReadableStream<Uint8Array>,
  onLine: (line: string) => void,
): Promise<void> {
  let buf = "";
  for await (const chunk of s) {
    buf += new TextDecoder().decode(chunk);
    let i = buf.indexOf("\n");
    while (i >= 0) {
      onLine(buf.slice(0, i));
      buf = buf.slice(i + 1);
      i = buf.indexOf("\n");
    }
  }
}

/** Polls `fn` every 100 ms until it returns a value (not undefined/false). */
export async function until<T>(
  what: string,
  fn: () => T | undefined | false,
  timeoutMs: number,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = fn();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await Bun.sleep(100);
  }
}

export function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(m?.[1] ?? 0) / 1024;
}

export function pct(xs: number[], p: number): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? Number.NaN;
}

/** `dist/fleetlet hub` on `port` with `dataDir`, its output kept in `out`. */
export class HubProcess {
  proc: ReturnType<typeof Bun.spawn> | undefined;
  out = "";
  token = "";

  constructor(
    private readonly dataDir: string,
    private readonly port: number,
    private readonly extra: string[] = [],
    /** The shell command that sets its open-files limit. */
    private readonly limit = ulimit,
  ) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Starts it (again); the first start waits for and keeps the operator token. */
  async start(): Promise<void> {
    this.out = "";
    this.proc = Bun.spawn(
      [
        "sh",
        "-c",
        `${this.limit}; d="$1"; p="$2"; shift 2; exec "$0" hub --data "$d" --listen "127.0.0.1:$p" --plain-http --log-level warn "$@"`,
        bin,
        this.dataDir,
        String(this.port),
        ...this.extra,
      ],
      { stdout: "pipe", stderr: "pipe" },
    );
    for (const s of [this.proc.stdout, this.proc.stderr])
      void pump(s as ReadableStream<Uint8Array>, (l) => {
        this.out += `${l}\n`;
      });
    if (this.token === "") {
      await until("the hub's operator token", () => /flo_\S+/.test(this.out), 10_000);
      this.token = /flo_\S+/.exec(this.out)?.[0] ?? "";
    }
  }

  async stop(): Promise<void> {
    this.proc?.kill("SIGTERM");
    await this.proc?.exited;
  }

  rss(): number {
    return rssMiB(this.proc?.pid ?? 0);
  }
}

/** A free loopback port. */
export function freePort(): number {
  const free = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = free.port;
  free.stop(true);
  return port;
}

/** Joins `n` nodes named `bench-<i>` (32 at a time); returns [name, credential] pairs. */
export async function joinAll(
  url: string,
  token: string,
  n: number,
  labels: Record<string, string> = {},
): Promise<[string, string][]> {
  const res = await fetch(`${url}/api/v1/join-tokens`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}` },
    body: JSON.stringify({ labels }),
  });
  const joinToken = ((await res.json()) as { token: string }).token;
  const out: [string, string][] = [];
  let next = 0;
  const one = async () => {
    while (next < n) {
      const name = `bench-${next++}`;
      const r = await fetch(`${url}/api/v1/join`, {
        method: "POST",
        body: JSON.stringify({ joinToken, nodeName: name }),
      });
      out.push([name, ((await r.json()) as { credential: string }).credential]);
    }
  };
  await Promise.all(Array.from({ length: 32 }, one));
  return out;
}

/** A simulated agent's socket to the hub: authenticated with `credential`, says `hello` when
 * open. */
export function agentSocket(wsUrl: string, credential: string, hello: Record<string, unknown>) {
  const ws = new WebSocket(wsUrl, { headers: { authorization: `Bearer ${credential}` } } as never);
  ws.onopen = () =>
    ws.send(JSON.stringify({ type: "hello", protocolVersion: 1, agentVersion: "bench", ...hello }));
  return ws;
}

/** Runs a benchmark's `main`, then `cleanup` (also on Ctrl-C); a failure sets exit code 1. */
export async function runBench(
  name: string,
  main: () => Promise<void>,
  cleanup: () => void,
): Promise<void> {
  process.on("SIGINT", () => {
    cleanup();
    process.exit(130);
  });
  try {
    await main();
  } catch (err) {
    console.error(`${name} failed: ${(err as Error).message}`);
    process.exitCode = 1;
  } finally {
    cleanup();
  }
}

/**
 * Splits `creds` over `workers` processes of `script` (in this folder), each given the hub URL,
 * its share's file (in `dir`) and `args`; `onLine(w, line)` gets each line a worker prints.
 */
export function spawnWorkers(opts: {
  dir: string;
  creds: [string, string][];
  workers: number;
  script: string;
  url: string;
  args: string[];
  onLine: (worker: number, line: string) => void;
}): ReturnType<typeof Bun.spawn>[] {
  const procs: ReturnType<typeof Bun.spawn>[] = [];
  for (let w = 0; w < opts.workers; w++) {
    const file = join(opts.dir, `agents-${w}.json`);
    writeFileSync(file, JSON.stringify(opts.creds.filter((_, i) => i % opts.workers === w)));
    const p = Bun.spawn(
      [
        "sh",
        "-c",
        `${ulimit}; exec "$0" "$@"`,
        process.execPath,
        join(import.meta.dir, opts.script),
        opts.url,
        file,
        ...opts.args,
      ],
      { stdout: "pipe", stderr: "inherit" },
    );
    procs.push(p);
    void pump(p.stdout as ReadableStream<Uint8Array>, (l) => opts.onLine(w, l));
  }
  return procs;
}

/** Reconnects a simulated agent after `delay`: full jitter over 1 s doubling up to 30 s. */
export function reconnectLater(s: { attempt: number }, connect: () => void): void {
  const wait = fullJitter(s.attempt, 1000, 30_000);
  s.attempt += 1;
  setTimeout(connect, wait);
}
