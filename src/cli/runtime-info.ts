// `fleetlet runtime-info`: what a user runs to check a device's container runtime.
import { parseArgs } from "node:util";
import { type CriClient, createCriClient, isCriError, runtimeCgroupDriver } from "../cri/index.ts";
import { CliError, UsageError } from "./errors.ts";

export const DEFAULT_RUNTIME_ENDPOINT = "unix:///run/containerd/containerd.sock";

function parse(argv: string[]) {
  try {
    return parseArgs({
      args: argv,
      options: {
        "runtime-endpoint": { type: "string" },
        timeout: { type: "string", default: "5" },
        output: { type: "string", short: "o" },
      },
      strict: true,
      allowPositionals: false,
    }).values;
  } catch (err) {
    throw new UsageError(`runtime-info: ${(err as Error).message}`);
  }
}

export async function runtimeInfoCommand(argv: string[]): Promise<number> {
  const flags = parse(argv);
  const endpoint =
    flags["runtime-endpoint"] ?? process.env.CONTAINER_RUNTIME_ENDPOINT ?? DEFAULT_RUNTIME_ENDPOINT;
  const timeoutMs = Number(flags.timeout) * 1000;
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
    throw new UsageError(
      `runtime-info: --timeout "${flags.timeout}" is not a positive number of seconds`,
    );
  }
  let client: CriClient;
  try {
    client = createCriClient({ endpoint, defaultTimeoutMs: timeoutMs });
  } catch (err) {
    throw new CliError((err as Error).message);
  }
  try {
    const version = await client.version({ version: "v1" });
    const status = await client.status({});
    const conditions = status.status?.conditions ?? [];
    const cgroups = await runtimeCgroupDriver(client);
    if (flags.output === "json") {
      const cgroupDriver = cgroups?.driver ?? null;
      console.log(JSON.stringify({ endpoint, ...version, cgroupDriver, conditions }, null, 2));
    } else {
      console.log(`Endpoint:        ${endpoint}`);
      console.log(`Runtime:         ${version.runtimeName} ${version.runtimeVersion}`);
      console.log(`Runtime API:     ${version.runtimeApiVersion}`);
      const said = cgroups === undefined ? "(not said)" : `${cgroups.driver}  (${cgroups.source})`;
      console.log(`Cgroup driver:   ${said}`);
      console.log("Conditions:");
      for (const c of conditions) {
        const why = c.status ? "" : `  ${c.reason}${c.message ? `: ${c.message}` : ""}`;
        console.log(`  ${c.type.padEnd(14)} ${String(c.status)}${why}`);
      }
    }
    return conditions.every((c) => c.status) ? 0 : 3;
  } catch (err) {
    if (isCriError(err)) {
      throw new CliError(`cannot reach the container runtime at ${endpoint}: ${err.message}`);
    }
    throw err;
  } finally {
    client.close();
  }
}
