// What the e2e tests of hub replicas share: starting a replica (its operator token read from the
// file every replica writes) and loopback ports nothing listens on (a replica's URL known before
// it starts, or an address that refuses).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { TestHub } from "./hub.ts";

/** Starts `hub` (a replica, or a hub on its own data folder) and reads its operator token. */
export async function startReplica(hub: TestHub): Promise<void> {
  await hub.start(30_000);
  hub.operatorToken = readFileSync(join(hub.dataDir, "operator-token"), "utf8").trim();
}

/** `n` distinct loopback ports outside the ephemeral range that nothing listens on (a port in
 * that range may connect to itself). */
export async function closedPorts(n: number): Promise<number[]> {
  const out: number[] = [];
  while (out.length < n) {
    const port = 20_000 + Math.floor(Math.random() * 10_000);
    const open = await Bun.connect({ hostname: "127.0.0.1", port, socket: { data() {} } }).then(
      (s) => {
        s.end();
        return true;
      },
      () => false,
    );
    if (!open && !out.includes(port)) out.push(port);
  }
  return out;
}
