// A CliIO for unit tests of commands: what the command printed, gathered per stream, with the
// clock at 0 and the environment given.
import type { CliIO } from "../../src/cli/io.ts";

export function captureIO(env: Record<string, string> = {}): {
  out: { stdout: string; stderr: string };
  io: CliIO;
} {
  const out = { stdout: "", stderr: "" };
  const io: CliIO = {
    stdout: (t) => {
      out.stdout += t;
    },
    stderr: (t) => {
      out.stderr += t;
    },
    env,
    now: () => 0,
  };
  return { out, io };
}
