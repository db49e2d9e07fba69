// `fleetlet hub --store postgres://… --bus nats://…`: a replica of a hub whose state is in
// PostgreSQL and whose replicas hear each other on NATS (docs/hub-replicas.md). The flags are
// checked here, and what every replica shares (the CA, the serving certificate, the operator
// token) is taken from the store, or made there by the first replica, before the hub starts.
import { hostname } from "node:os";
import { createNatsBus, type NatsBus } from "../hub/bus-nats.ts";
import { SealError, type SecretSealer } from "../hub/deploy/sealing.ts";
import { sharedReplicaIdentity } from "../hub/replica-identity.ts";
import { saveOperatorToken } from "../hub/state.ts";
import { newOwnTls, writeOwnTls } from "../hub/tls/index.ts";
import { generateToken } from "../hub/tokens.ts";
import type { Clock } from "../util/clock.ts";
import type { Logger } from "../util/log.ts";
import { CliError, UsageError } from "./errors.ts";

export interface ReplicaFlags {
  postgresUrl: string;
  busServers: string[];
  replicaId: string;
}

/** The replica's flags, or undefined for a single hub (neither --store nor --bus). */
export function replicaFlags(flags: {
  store?: string;
  bus?: string;
  "replica-id"?: string;
}): ReplicaFlags | undefined {
  const { store, bus } = flags;
  if (store === undefined && bus === undefined) {
    if (flags["replica-id"] !== undefined)
      throw new UsageError("--replica-id goes with --store and --bus");
    return undefined;
  }
  if (store === undefined)
    throw new UsageError(
      "--bus needs --store: replicas share their state in PostgreSQL (--store postgres://…)",
    );
  if (bus === undefined)
    throw new UsageError(
      "--store needs --bus: replicas on one store hear each other's changes on NATS (--bus nats://HOST:PORT)",
    );
  if (!/^postgres(ql)?:\/\/[^/]/.test(store))
    throw new UsageError(
      `invalid --store ${JSON.stringify(store)}: want postgres://USER@HOST:PORT/DB (without --store the hub keeps its state in SQLite in its data folder)`,
    );
  const busServers = bus.split(",").map((s) => s.trim());
  for (const s of busServers)
    if (!/^nats:\/\/[^/,\s]+$/.test(s))
      throw new UsageError(
        `invalid --bus ${JSON.stringify(bus)}: want nats://HOST:PORT, comma-separated for several servers`,
      );
  return { postgresUrl: store, busServers, replicaId: flags["replica-id"] ?? hostname() };
}

/**
 * Takes the replicas' shared CA, serving certificate (for `sans`) and operator token from the
 * store (made there first when there are none) and writes them into `dataDir` as a single hub
 * keeps its own: the TLS files only when `ownTls` (the hub serves with its own CA).
 */
export async function prepareReplica(
  r: ReplicaFlags,
  o: { sealer: SecretSealer; dataDir: string; sans: string[]; ownTls: boolean; now: number },
  servingLifetimeMs: number | undefined,
): Promise<void> {
  let shared: Awaited<ReturnType<typeof sharedReplicaIdentity>>;
  try {
    shared = await sharedReplicaIdentity(
      r.postgresUrl,
      o.sealer,
      () => ({
        tls: newOwnTls(o.sans, o.now, servingLifetimeMs),
        operatorToken: generateToken("operator"),
      }),
      o.now,
    );
  } catch (err) {
    if (err instanceof SealError)
      throw new CliError(
        `the hub cannot start: what the store holds for every replica does not open with this --secrets-key-file (every replica needs the same one): ${err.message}`,
      );
    throw new CliError(`the hub cannot start: store ${redact(r.postgresUrl)}: ${String(err)}`);
  }
  if (o.ownTls) writeOwnTls(o.dataDir, shared.tls);
  saveOperatorToken(o.dataDir, shared.operatorToken);
}

/** The URL without its password. */
function redact(url: string): string {
  return url.replace(/\/\/([^:@/]*):[^@/]*@/, "//$1:***@");
}

/** The replica's bus on NATS; it connects in the background (bus-nats.ts). */
export function replicaBus(r: ReplicaFlags, clock: Clock, log: Logger): NatsBus {
  const bus = createNatsBus({
    servers: r.busServers,
    clock,
    log: log.with({ component: "bus" }),
    name: r.replicaId,
  });
  bus.ready().then(
    () => log.info("bus connected", { servers: r.busServers.join(",") }),
    () => {},
  );
  return bus;
}
