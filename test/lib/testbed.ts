// The runtime test bed for e2e tests: reads the env file that `scripts/testbed start` writes.
// e2e tests need root and the test bed; `scripts/test` starts it before running them.
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";

export const repoRoot = resolve(import.meta.dir, "../..");
export const fleetletBin = join(repoRoot, "dist/fleetlet");

export interface Testbed {
  dir: string;
  endpoint: string;
  socket: string;
  containerdPidFile: string;
  containerdConfig: string;
  registry: string;
  sandboxImage: string;
  busybox: string;
  busyboxV2: string;
  missingImage: string;
  /** busybox plus 8, 16, 24 and 32 MiB that do not compress: images of known, different sizes. */
  filler: { "8m": string; "16m": string; "24m": string; "32m": string };
  /** The registry that wants a password (htpasswd basic auth), "127.0.0.1:PORT". */
  authRegistry: string;
  authUser: string;
  authPassword: string;
  /** A busybox image only in the password registry, with an image id of its own. */
  authBusybox: string;
  /** The pods' subnet on the test bed's CNI bridge, "A.B.C.D/N". */
  cniSubnet: string;
}

export function loadTestbed(): Testbed {
  const dir = process.env.FLEETLET_TESTBED ?? join(repoRoot, ".testbed");
  const file = join(dir, "env");
  if (!existsSync(file)) {
    throw new Error(`the test bed is not running (no ${file}): run scripts/testbed start as root`);
  }
  const env: Record<string, string> = {};
  for (const line of readFileSync(file, "utf8").split("\n")) {
    const eq = line.indexOf("=");
    if (eq > 0) env[line.slice(0, eq)] = line.slice(eq + 1);
  }
  const get = (key: string): string => {
    const v = env[key];
    if (v === undefined) throw new Error(`${file} has no ${key}: restart the test bed`);
    return v;
  };
  return {
    dir,
    endpoint: get("CONTAINERD_ENDPOINT"),
    socket: get("CONTAINERD_SOCKET"),
    containerdPidFile: get("CONTAINERD_PID_FILE"),
    containerdConfig: get("CONTAINERD_CONFIG"),
    registry: get("REGISTRY"),
    sandboxImage: get("SANDBOX_IMAGE"),
    busybox: get("IMAGE_BUSYBOX"),
    busyboxV2: get("IMAGE_BUSYBOX_V2"),
    missingImage: get("IMAGE_MISSING"),
    filler: {
      "8m": get("IMAGE_FILLER_8M"),
      "16m": get("IMAGE_FILLER_16M"),
      "24m": get("IMAGE_FILLER_24M"),
      "32m": get("IMAGE_FILLER_32M"),
    },
    authRegistry: get("AUTH_REGISTRY"),
    authUser: get("AUTH_USER"),
    authPassword: get("AUTH_PASSWORD"),
    authBusybox: get("IMAGE_AUTH_BUSYBOX"),
    cniSubnet: get("CNI_SUBNET"),
  };
}

/** Whether the IPv4 address `ip` lies in `cidr` ("A.B.C.D/N"). */
export function inSubnet(ip: string, cidr: string): boolean {
  const toInt = (a: string) => a.split(".").reduce((n, o) => n * 256 + Number(o), 0);
  const [base = "", bits = "32"] = cidr.split("/");
  const size = 2 ** (32 - Number(bits));
  return Math.floor(toInt(ip) / size) === Math.floor(toInt(base) / size);
}

/** Polls `fn` until it returns a value other than undefined, null or false, or throws after `timeoutMs`. */
export async function eventually<T>(
  what: string,
  fn: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  timeoutMs = 20_000,
  intervalMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const v = await fn();
      // undefined, null and false mean "not yet" (a regex's exec, a Map's miss, a failed check).
      if (v !== undefined && v !== null && v !== false) return v;
      // A later attempt that answered: an earlier error is no longer why it waits.
      lastError = undefined;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      const why = lastError instanceof Error ? `: last error: ${lastError.message}` : "";
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${why}`);
    }
    await Bun.sleep(intervalMs);
  }
}

/** A unique, valid name for test objects. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 6)}`;
}

/** Stops the test bed's containerd (SIGTERM) and waits until it has exited. */
export async function stopContainerd(tb: Testbed): Promise<void> {
  const pid = Number(readFileSync(tb.containerdPidFile, "utf8").trim());
  process.kill(pid, "SIGTERM");
  await eventually("containerd to stop", () => {
    try {
      process.kill(pid, 0);
      return false;
    } catch {
      return true;
    }
  });
}

/** Starts the test bed's containerd again (`scripts/testbed start`); throws if that fails. */
export function startContainerd(): void {
  const p = Bun.spawnSync([join(repoRoot, "scripts/testbed"), "start"], { stdout: "ignore" });
  if (p.exitCode !== 0) throw new Error(`scripts/testbed start failed: ${p.stderr.toString()}`);
}
