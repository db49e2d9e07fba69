// What a CLI command touches outside itself, injected so that tests capture output.

export interface CliIO {
  stdout(text: string): void;
  stderr(text: string): void;
  env: Record<string, string | undefined>;
  /** Epoch milliseconds, for AGE columns. */
  now(): number;
  /** Ends `logs -f` (tests); the real process just dies on Ctrl-C. */
  signal?: AbortSignal;
}

/** The real process: stdout, stderr, environment and wall clock. */
export function processIO(): CliIO {
  return {
    stdout: (t) => void process.stdout.write(t),
    stderr: (t) => void process.stderr.write(t),
    env: process.env,
    now: () => Date.now(),
  };
}
