// A private D-Bus message bus for unit tests: `dbus-daemon --session` listening on a socket in a
// temporary folder, started by the test and stopped by it; needs no root and no running systemd.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface PrivateBus {
  /** The bus's unix socket. */
  path: string;
  /** Stops the daemon and removes its folder. */
  stop(): Promise<void>;
}

/** Starts a private bus and resolves once it prints its address (it listens by then). */
export async function startPrivateBus(): Promise<PrivateBus> {
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-dbus-"));
  const path = join(dir, "bus");
  const proc = Bun.spawn(
    ["dbus-daemon", "--session", "--nofork", "--print-address", `--address=unix:path=${path}`],
    { stdin: "ignore", stdout: "pipe", stderr: "ignore" },
  );
  const reader = (proc.stdout as ReadableStream<Uint8Array>).getReader();
  let out = "";
  const timer = setTimeout(() => proc.kill("SIGKILL"), 10_000);
  while (!out.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`dbus-daemon ended before printing its address: ${out}`);
    out += new TextDecoder().decode(value);
  }
  clearTimeout(timer);
  reader.releaseLock();
  return {
    path,
    async stop() {
      proc.kill("SIGTERM");
      await proc.exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
