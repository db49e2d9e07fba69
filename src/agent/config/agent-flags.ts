// Command-line flags of `fleetlet agent`: `--config FILE`, and one kebab-case flag per scalar
// config field (`--file-check-frequency 20s` or `--file-check-frequency=20s`) setting the same
// field as the file; list fields take comma-separated values (--allowed-unsafe-sysctls
// 'kernel.msg*,net.core.somaxconn', as the kubelet's). The hub fields have short flags: --hub, --join-token, --hub-ca-file,
// --hub-insecure true|false, --hub-max-streams.

import { deviceFlags } from "./devices-schema.ts";
import { evictionFlags, evictionFlagValue } from "./eviction-schema.ts";
import { gcFlags, gcIntegerFields } from "./gc-schema.ts";
import { pullFlags, pullFlagValue, pullIntegerFields } from "./pulls-schema.ts";
import { resourceFlags, resourceFlagValue } from "./resources-schema.ts";
import { closestName } from "./suggest.ts";
import { updateFlags } from "./updates-schema.ts";

/** Raised for any unusable config or flag; its message is one line naming the field and value. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}

const scalarFields = [
  "staticPodPath",
  "rootDir",
  "containerRuntimeEndpoint",
  "nodeName",
  "fileCheckFrequency",
  "syncFrequency",
  "housekeepingInterval",
  "maxPods",
  "podLogsDir",
  "apiSocket",
  "runtimeRequestTimeout",
  "imagePullCredentialsFile",
  "imagesImportPath",
  "maxParallelStarts",
  "logLevel",
  "logFormat",
  "plegRelistPeriod",
  "plegEventedRelistPeriod",
  "crashLoopBackOffBase",
  "crashLoopBackOffMax",
  "imagePullBackOffBase",
  "imagePullBackOffMax",
  "nodeStatusUpdateFrequency",
  "hubOutboxMaxEvents",
  "hubReconnectBackOffBase",
  "hubReconnectBackOffMax",
] as const;

const integerFields = new Set<string>([
  "maxPods",
  "hub.maxStreams",
  "hubOutboxMaxEvents",
  "maxParallelStarts",
  ...gcIntegerFields,
  ...pullIntegerFields,
]);

function kebab(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}

/** Flag name (without "--") → dotted field path it sets. */
const flagToField = new Map<string, string>([
  ...scalarFields.map((f): [string, string] => [kebab(f), f]),
  ["node-labels", "nodeLabels"],
  ["allowed-unsafe-sysctls", "allowedUnsafeSysctls"],
  ["hub", "hub.url"],
  ["join-token", "hub.joinToken"],
  ["hub-ca-file", "hub.caFile"],
  ["hub-insecure", "hub.insecure"],
  ["hub-max-streams", "hub.maxStreams"],
  ["device-health-period", "deviceHealthPeriod"],
  ["device-health-counters-period", "deviceHealthCountersPeriod"],
  ...resourceFlags,
  ...gcFlags,
  ...pullFlags,
  ...updateFlags,
  ...evictionFlags,
  ...deviceFlags,
]);

/** Every flag of `fleetlet agent` with the config field it sets, for --help. */
export function agentFlagList(): { flag: string; field: string }[] {
  return [...flagToField].map(([flag, field]) => ({ flag: `--${flag}`, field }));
}

/** The flag that sets a dotted field path, e.g. "hub.url" → "--hub". */
export function flagForField(field: string): string | undefined {
  for (const [flag, f] of flagToField) if (f === field) return `--${flag}`;
  return undefined;
}

export interface ParsedFlags {
  /** The value of --config, if given. */
  configFile?: string;
  /** The fields the flags set, shaped like the config file (not yet validated). */
  fields: Record<string, unknown>;
}

/** Splits argv into --config and the config fields; throws ConfigError on unknown flags. */
export function parseAgentFlags(argv: readonly string[]): ParsedFlags {
  const out: ParsedFlags = { fields: {} };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? "";
    if (!arg.startsWith("--") || arg === "--") {
      throw new ConfigError(
        `unexpected argument ${JSON.stringify(arg)}: fleetlet agent takes only flags`,
      );
    }
    const eq = arg.indexOf("=");
    const name = eq < 0 ? arg.slice(2) : arg.slice(2, eq);
    let value: string | undefined = eq < 0 ? undefined : arg.slice(eq + 1);
    if (name !== "config" && !flagToField.has(name)) throw unknownFlag(name);
    if (value === undefined) {
      value = argv[i + 1];
      if (value === undefined || value.startsWith("--"))
        throw new ConfigError(`flag --${name} needs a value`);
      i++;
    }
    if (name === "config") out.configFile = value;
    else setField(out.fields, flagToField.get(name) ?? name, flagValue(name, value));
  }
  return out;
}

function unknownFlag(name: string): ConfigError {
  const guess = closestName(name, [...flagToField.keys(), "config"]);
  return new ConfigError(`unknown flag --${name}${guess ? ` (did you mean --${guess}?)` : ""}`);
}

function flagValue(name: string, value: string): unknown {
  const field = flagToField.get(name) ?? "";
  if (integerFields.has(field) && /^-?\d+$/.test(value)) return Number(value);
  if (field === "nodeLabels") return parseLabels(value);
  if (field === "allowedUnsafeSysctls")
    return value.split(",").flatMap((p) => (p.trim() === "" ? [] : [p.trim()]));
  if (field === "hub.insecure" && (value === "true" || value === "false")) return value === "true";
  if (resourceFlags.some(([, f]) => f === field)) return resourceFlagValue(field, value);
  if (evictionFlags.some(([, f]) => f === field)) return evictionFlagValue(field, value);
  if (pullFlags.some(([, f]) => f === field)) return pullFlagValue(field, value);
  return value;
}

/** "a=1,b=2" → {a: "1", b: "2"}, as kubelet's --node-labels. */
function parseLabels(value: string): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const pair of value.split(",")) {
    if (pair.trim() === "") continue;
    const eq = pair.indexOf("=");
    if (eq < 0)
      throw new ConfigError(`invalid flag --node-labels: ${JSON.stringify(pair)} is not key=value`);
    labels[pair.slice(0, eq).trim()] = pair.slice(eq + 1).trim();
  }
  return labels;
}

function setField(target: Record<string, unknown>, field: string, value: unknown): void {
  const [head = "", tail] = field.split(".", 2);
  if (tail === undefined) {
    target[head] = value;
    return;
  }
  const nested = (target[head] ?? {}) as Record<string, unknown>;
  nested[tail] = value;
  target[head] = nested;
}
