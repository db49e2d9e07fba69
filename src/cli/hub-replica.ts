// `fleetlet hub --store postgres://… --bus nats://…`: a replica of a hub whose state is in
// PostgreSQL and whose replicas hear each other on NATS (docs/hub-replicas.md). Its flags are
// checked here; hub-replica-start.ts prepares it.
import { hostname } from "node:os";
import { UsageError } from "./errors.ts";

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
  "leader-interval"?: string;
  "replica-beat-interval"?: string;
}): ReplicaFlags | undefined {
  const { store, bus } = flags;
  if (store === undefined && bus === undefined) {
    for (const f of ["replica-id", "leader-interval", "replica-beat-interval"] as const)
      if (flags[f] !== undefined) throw new UsageError(`--${f} goes with --store and --bus`);
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
