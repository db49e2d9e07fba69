// `fleetlet hub` itself: the hub server, with its TLS (given, its own CA, or plain HTTP on
// loopback) and its flags.
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { parseDuration } from "../api/duration.ts";
import { loadSealer, SealError, type SecretSealer } from "../hub/deploy/sealing.ts";
import type { ChangeLogOptions } from "../hub/follow.ts";
import { startHub } from "../hub/hub.ts";
import { defaultSans, givenTls, type HubTls, ownTls } from "../hub/tls/index.ts";
import type { RenewedTls } from "../hub/tls/renew.ts";
import { realClock } from "../util/clock.ts";
import { createLogger, type LogLevel } from "../util/log.ts";
import { type FlagSpecs, parseArgs } from "./args.ts";
import { CliError, UsageError } from "./errors.ts";
import { type ReplicaFlags, replicaFlags } from "./hub-replica.ts";
import type { CliIO } from "./io.ts";

const serveFlags = {
  listen: { type: "string" },
  data: { type: "string" },
  "tls-cert": { type: "string" },
  "tls-key": { type: "string" },
  "tls-ca": { type: "string" },
  "tls-san": { type: "string" },
  "plain-http": { type: "boolean" },
  "heartbeat-interval": { type: "string" },
  "rate-limit": { type: "int" },
  "rate-burst": { type: "int" },
  "max-message-bytes": { type: "int" },
  "rollout-interval": { type: "string" },
  "max-streams-per-node": { type: "int" },
  "node-credential-lifetime": { type: "string" },
  "serving-cert-lifetime": { type: "string" },
  "serving-cert-check-interval": { type: "string" },
  "secrets-key-file": { type: "string" },
  store: { type: "string" },
  bus: { type: "string" },
  "replica-id": { type: "string" },
  "change-log-retention": { type: "string" },
  "change-log-max-rows": { type: "int" },
  "leader-interval": { type: "string" },
  "replica-beat-interval": { type: "string" },
  "log-level": { type: "string" },
  help: { type: "boolean", short: "h" },
} as const satisfies FlagSpecs;

/** "127.0.0.1:7443", "[::1]:7443", ":7443" → hostname and port. */
function parseListen(listen: string): { hostname: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d+)$/.exec(listen);
  const port = Number(m?.[3]);
  if (m === null || !Number.isInteger(port) || port > 65535)
    throw new UsageError(`invalid --listen ${JSON.stringify(listen)}: want HOST:PORT`);
  return { hostname: m[1] ?? (m[2] === "" ? "0.0.0.0" : (m[2] ?? "0.0.0.0")), port };
}

function durationFlag(value: string | undefined, flag: string): number | undefined {
  if (value === undefined) return undefined;
  try {
    return parseDuration(value);
  } catch (err) {
    throw new UsageError(`invalid --${flag} ${JSON.stringify(value)}: ${(err as Error).message}`);
  }
}

function positiveDuration(value: string | undefined, flag: string): number | undefined {
  const ms = durationFlag(value, flag);
  if (ms !== undefined && ms <= 0)
    throw new UsageError(`invalid --${flag} ${JSON.stringify(value)}: must be positive`);
  return ms;
}

/** The lifetime of node credentials and the check interval of the serving certificate. */
function credentialTimings(flags: {
  "node-credential-lifetime"?: string;
  "serving-cert-check-interval"?: string;
}): { credentialLifetimeMs?: number; tlsCheckIntervalMs?: number } {
  const lifetime = positiveDuration(flags["node-credential-lifetime"], "node-credential-lifetime");
  const check = positiveDuration(
    flags["serving-cert-check-interval"],
    "serving-cert-check-interval",
  );
  return {
    ...(lifetime !== undefined && { credentialLifetimeMs: lifetime }),
    ...(check !== undefined && { tlsCheckIntervalMs: check }),
  };
}

/** A replica's time between tries for the lead and the leader's checks of its lock, and between
 * its beats in the store. */
function leaderTiming(flags: { "leader-interval"?: string; "replica-beat-interval"?: string }): {
  leaderIntervalMs?: number;
  replicaBeatIntervalMs?: number;
} {
  const ms = positiveDuration(flags["leader-interval"], "leader-interval");
  const beat = positiveDuration(flags["replica-beat-interval"], "replica-beat-interval");
  return {
    ...(ms !== undefined && { leaderIntervalMs: ms }),
    ...(beat !== undefined && { replicaBeatIntervalMs: beat }),
  };
}

/** The hub's timings and limits given by flags. */
function tuning(flags: {
  "heartbeat-interval"?: string;
  "rollout-interval"?: string;
  "max-streams-per-node"?: number;
  "max-message-bytes"?: number;
  "rate-limit"?: number;
  "rate-burst"?: number;
}) {
  const heartbeatIntervalMs = durationFlag(flags["heartbeat-interval"], "heartbeat-interval");
  const rolloutIntervalMs = durationFlag(flags["rollout-interval"], "rollout-interval");
  return {
    ...(heartbeatIntervalMs !== undefined && { heartbeatIntervalMs }),
    ...(rolloutIntervalMs !== undefined && { rolloutIntervalMs }),
    ...(flags["max-streams-per-node"] !== undefined && {
      maxStreamsPerNode: flags["max-streams-per-node"],
    }),
    ...(flags["max-message-bytes"] !== undefined && {
      maxMessageBytes: flags["max-message-bytes"],
    }),
    ...(flags["rate-limit"] !== undefined && {
      rateLimit: {
        messagesPerSecond: flags["rate-limit"],
        burst: flags["rate-burst"] ?? flags["rate-limit"] * 10,
      },
    }),
  };
}

/** How long and how many rows the replicas' change log keeps. */
function changeLogFlags(flags: {
  "change-log-retention"?: string;
  "change-log-max-rows"?: number;
}): ChangeLogOptions {
  const retentionMs = positiveDuration(flags["change-log-retention"], "change-log-retention");
  const maxRows = flags["change-log-max-rows"];
  if (maxRows !== undefined && maxRows < 1)
    throw new UsageError(`invalid --change-log-max-rows ${maxRows}: must be 1 or more`);
  return {
    ...(retentionMs !== undefined && { retentionMs }),
    ...(maxRows !== undefined && { maxRows }),
  };
}

/** The sealer of Secrets at rest: the operator's key file, else `<data>/secrets.key` (made at
 * the first start). */
function secretsSealer(file: string | undefined, dataDir: string): SecretSealer {
  try {
    if (file !== undefined) return loadSealer(file, false).sealer;
    if (!existsSync(dataDir)) mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    return loadSealer(join(dataDir, "secrets.key"), true).sealer;
  } catch (err) {
    throw new CliError((err as Error).message);
  }
}

/** startHub, with a stored Secret that does not open said as the reason it cannot start. */
async function startHubOrSay(opts: Parameters<typeof startHub>[0]): ReturnType<typeof startHub> {
  try {
    return await startHub(opts);
  } catch (err) {
    if (err instanceof SealError) throw new CliError(`the hub cannot start: ${err.message}`);
    throw err;
  }
}

/** `fleetlet hub [flags]`: serves until SIGTERM or SIGINT. */
export async function serveHubCommand(argv: string[], io: CliIO, usage: string): Promise<number> {
  const { flags } = parseArgs(argv, serveFlags);
  if (flags.help) {
    io.stdout(usage);
    return 0;
  }
  const { hostname, port } = parseListen(flags.listen ?? "127.0.0.1:7443");
  const replica = replicaFlags(flags);
  const dataDir = flags.data ?? "/var/lib/fleetlet/hub";
  const clock = realClock;
  const lifetimeMs = positiveDuration(flags["serving-cert-lifetime"], "serving-cert-lifetime");
  const log = createLogger({ level: (flags["log-level"] ?? "info") as LogLevel });
  const sealer = secretsSealer(flags["secrets-key-file"], dataDir);
  const o = { sealer, dataDir, hostname, servingLifetimeMs: lifetimeMs };
  const replicaStart = await prepared(replica, flags, o);
  const { tls, renewTls: renewOwn } = serveTls(flags, hostname, dataDir, clock.now(), lifetimeMs);
  const renewTls = renewal(replica, replicaStart, renewOwn, {
    ...{ sealer, dataDir, sans: sansOf(flags, hostname) },
    ...(lifetimeMs !== undefined && { servingLifetimeMs: lifetimeMs }),
  });
  const hub = await startHubOrSay({
    dataDir,
    sealer,
    ...(replica !== undefined &&
      replicaStart !== undefined && {
        postgresUrl: replica.postgresUrl,
        ...replicaStart.replicaNats(replica, clock, log),
        replicaId: replica.replicaId,
        changeLog: changeLogFlags(flags),
        ...leaderTiming(flags),
      }),
    hostname,
    port,
    ...(tls !== undefined && { tls }),
    ...(renewTls !== undefined && { renewTls }),
    ...credentialTimings(flags),
    ...tuning(flags),
    clock,
    log,
  });
  if (hub.createdOperatorToken !== undefined)
    io.stdout(
      `operator token (saved in ${dataDir}/operator-token):\n${hub.createdOperatorToken}\n`,
    );
  if (hub.caHash !== undefined) log.info("hub CA", { hash: hub.caHash });
  log.info("hub listening", { url: hub.url, nodes: hub.fleet.nodes.size });
  await untilSignalled();
  log.info("hub stopping");
  await hub.stop();
  return 0;
}

/** A replica's start (hub-replica-start.ts, loaded only for one), its shared identity written
 * into `dataDir` first; undefined for a single hub. */
async function prepared(
  replica: ReplicaFlags | undefined,
  flags: { "tls-cert"?: string; "plain-http"?: boolean; "tls-san"?: string },
  o: { sealer: SecretSealer; dataDir: string; hostname: string; servingLifetimeMs?: number },
) {
  if (replica === undefined) return undefined;
  const replicaStart = await import("./hub-replica-start.ts");
  const ownTls = flags["tls-cert"] === undefined && flags["plain-http"] !== true;
  const sans = sansOf(flags, o.hostname);
  await replicaStart.prepareReplica(
    replica,
    { sealer: o.sealer, dataDir: o.dataDir, sans, ownTls, now: realClock.now() },
    o.servingLifetimeMs,
  );
  return replicaStart;
}

/** The check of the hub's own serving certificate: a replica's renews through the store, so
 * that every replica serves one pair (replica-tls.ts); absent without one of its own. */
function renewal(
  replica: ReplicaFlags | undefined,
  replicaStart: typeof import("./hub-replica-start.ts") | undefined,
  renewOwn: ((now: number) => RenewedTls) | undefined,
  o: Parameters<typeof import("./hub-replica-start.ts").replicaRenew>[1],
) {
  if (replica === undefined || replicaStart === undefined || renewOwn === undefined)
    return renewOwn;
  return replicaStart.replicaRenew(replica, o);
}

/** Resolves at the first SIGTERM or SIGINT. */
function untilSignalled(): Promise<void> {
  return new Promise<void>((resolve) => {
    process.once("SIGTERM", () => resolve());
    process.once("SIGINT", () => resolve());
  });
}

/** The names of the hub's own serving certificate: this host's and --tls-san's. */
function sansOf(flags: { "tls-san"?: string }, hostname: string): string[] {
  return defaultSans(hostname, (flags["tls-san"] ?? "").split(","));
}

/** Whether the --listen host is loopback: plain HTTP is allowed only there. */
function isLoopbackHost(host: string): boolean {
  return host === "localhost" || host === "::1" || /^127\./.test(host);
}

/** The certificate to serve: the given files, the hub's own CA in the data dir (made or
 * renewed as of `now`, and how to renew it while serving), or none (--plain-http, loopback only). */
function serveTls(
  flags: {
    "tls-cert"?: string;
    "tls-key"?: string;
    "tls-ca"?: string;
    "tls-san"?: string;
    "plain-http"?: boolean;
  },
  hostname: string,
  dataDir: string,
  now: number,
  servingLifetimeMs: number | undefined,
): { tls?: HubTls; renewTls?: (now: number) => HubTls & { renewed: boolean } } {
  const cert = flags["tls-cert"];
  const key = flags["tls-key"];
  if ((cert === undefined) !== (key === undefined))
    throw new UsageError("--tls-cert and --tls-key go together");
  if (flags["plain-http"] === true) {
    if (cert !== undefined) throw new UsageError("--plain-http and --tls-cert exclude each other");
    if (!isLoopbackHost(hostname))
      throw new UsageError(
        `--plain-http is only for a loopback --listen address (got ${hostname}): exec sessions and Secrets travel over the hub's connections`,
      );
    return {};
  }
  try {
    if (cert !== undefined && key !== undefined)
      return {
        tls: givenTls({
          certFile: cert,
          keyFile: key,
          ...(flags["tls-ca"] !== undefined && { caFile: flags["tls-ca"] }),
        }),
      };
    if (flags["tls-ca"] !== undefined) throw new UsageError("--tls-ca goes with --tls-cert");
    if (!existsSync(dataDir)) mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    const sans = sansOf(flags, hostname);
    const renewTls = (at: number) => ownTls(dataDir, sans, at, servingLifetimeMs);
    return { tls: renewTls(now), renewTls };
  } catch (err) {
    if (err instanceof CliError) throw err;
    throw new CliError(`cannot set up the hub's TLS: ${(err as Error).message}`);
  }
}
