// `fleetlet hub --store … --bus …`, once the flags are checked (hub-replica.ts): what every
// replica shares (the CA, the serving certificate, the operator token) is taken from the store,
// or made there by the first replica, before the hub starts, and the replica's bus on NATS.
// Imported only by a replica, so that other commands do not load the PostgreSQL and NATS code.
import { createNatsBus, type NatsBus } from "../hub/bus-nats.ts";
import { SealError, type SecretSealer } from "../hub/deploy/sealing.ts";
import { createReplicaStreams } from "../hub/relay/replica.ts";
import { sharedReplicaIdentity } from "../hub/replica-identity.ts";
import { type ReplicaTlsOptions, replicaRenewTls } from "../hub/replica-tls.ts";
import { saveOperatorToken } from "../hub/state.ts";
import { newOwnTls, writeOwnTls } from "../hub/tls/index.ts";
import type { RenewedTls } from "../hub/tls/renew.ts";
import { generateToken } from "../hub/tokens.ts";
import type { Clock } from "../util/clock.ts";
import type { Logger } from "../util/log.ts";
import { CliError } from "./errors.ts";
import type { ReplicaFlags } from "./hub-replica.ts";

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

/** The replica's check of its own serving certificate: renewed through the store, so that every
 * replica serves the pair the first to renew stored (replica-tls.ts). */
export function replicaRenew(
  r: ReplicaFlags,
  o: Omit<ReplicaTlsOptions, "url">,
): (now: number) => Promise<RenewedTls> {
  return replicaRenewTls({ url: r.postgresUrl, ...o });
}

/** The URL without its password. */
function redact(url: string): string {
  return url.replace(/\/\/([^:@/]*):[^@/]*@/, "//$1:***@");
}

/** The replica's bus on NATS, which connects in the background (bus-nats.ts), and the relay of
 * streams between replicas on the bus's connection (relay/replica.ts). */
export function replicaNats(r: ReplicaFlags, clock: Clock, log: Logger) {
  const bus = replicaBus(r, clock, log);
  const relay = createReplicaStreams(bus, { clock, log });
  return { bus, relay };
}

function replicaBus(r: ReplicaFlags, clock: Clock, log: Logger): NatsBus {
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
