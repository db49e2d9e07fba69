// Running commands the way a user does, for e2e tests: to completion with their output, in the
// background until they print something, and under a pseudo-terminal (`script`), typing into it.
import { eventually } from "./testbed.ts";

export interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `cmd` to its end (killed after `timeoutMs`), feeding it `stdin`. */
export async function run(
  cmd: string[],
  opts: { env?: Record<string, string>; stdin?: string; timeoutMs?: number } = {},
): Promise<Ran> {
  const p = Bun.spawn(cmd, {
    stdin: opts.stdin === undefined ? "ignore" : new Blob([opts.stdin]),
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, ...opts.env },
  });
  const timer = setTimeout(() => p.kill("SIGKILL"), opts.timeoutMs ?? 20_000);
  const [stdout, stderr, code] = await Promise.all([
    new Response(p.stdout).text(),
    new Response(p.stderr).text(),
    p.exited,
  ]);
  clearTimeout(timer);
  return { code, stdout, stderr };
}

/** A command running in the background, its output so far. */
export class Background {
  out = "";
  readonly proc: ReturnType<typeof Bun.spawn>;

  constructor(cmd: string[], env: Record<string, string> = {}) {
    this.proc = Bun.spawn(cmd, {
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
      env: { ...process.env, ...env },
    });
    for (const s of [this.proc.stdout, this.proc.stderr]) {
      void (async () => {
        const d = new TextDecoder();
        for await (const c of s as ReadableStream<Uint8Array>) this.out += d.decode(c);
      })();
    }
  }

  /** Waits until the output matches `re`; returns the match. */
  waitFor(re: RegExp, what: string, timeoutMs = 15_000): Promise<RegExpExecArray> {
    return eventually(what, () => re.exec(this.out) ?? undefined, timeoutMs, 20);
  }

  async stop(): Promise<number | null> {
    this.proc.kill("SIGTERM");
    return this.proc.exited;
  }
}

/**
 * Runs `command` (a shell line) under a pseudo-terminal of `cols`×`rows`, typing each of `keys`
 * once the output shows its `after` text; resolves with the exit code and everything printed.
 */
export async function underPty(
  command: string,
  keys: { after: RegExp; type: string }[],
  opts: { env?: Record<string, string>; cols?: number; rows?: number; timeoutMs?: number } = {},
): Promise<{ code: number | null; out: string }> {
  const size = `stty cols ${opts.cols ?? 100} rows ${opts.rows ?? 30}`;
  const p = Bun.spawn(["script", "-qefc", `${size}; ${command}`, "/dev/null"], {
    stdin: "pipe",
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, ...opts.env },
  });
  let out = "";
  void (async () => {
    const d = new TextDecoder();
    for await (const c of p.stdout as ReadableStream<Uint8Array>) out += d.decode(c);
  })();
  const timer = setTimeout(() => p.kill("SIGKILL"), opts.timeoutMs ?? 20_000);
  let from = 0;
  for (const k of keys) {
    await eventually(
      `${k.after} in the terminal`,
      () => k.after.test(out.slice(from)) || undefined,
      15_000,
      20,
    );
    from = out.length;
    p.stdin.write(k.type);
    p.stdin.flush();
  }
  const code = await p.exited;
  clearTimeout(timer);
  p.stdin.end();
  return { code, out };
}
