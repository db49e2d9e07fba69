// The RunPodSandbox config of a pod, as kubelet's generatePodSandboxConfig builds it:
// metadata, hostname (none for host-network pods), log directory, DNS, host port mappings,
// labels/annotations (docs/runtime-contract.md), namespaces and the pod security context.
//
// DNS: fleetlet has no cluster DNS, so every policy but None resolves like "Default" (the host's
// resolv.conf, as the kubelet falls back to when no cluster DNS is configured); then the pod's
// dnsConfig is merged in: nameservers and searches appended without duplicates, options merged
// by name with the pod's winning.

import { join } from "node:path";
import type { Pod, PodDNSConfig } from "../../api/types.ts";
import type { DNSConfig, PodSandboxConfig, PortMapping } from "../../cri/index.ts";
import type { HostFiles } from "../../util/host-file.ts";
import { dottedSysctlName } from "../sysctl/names.ts";
import { sandboxAnnotations, sandboxLabels } from "./labels.ts";
import { sandboxSecurityContext } from "./security.ts";

export interface SandboxConfigContext {
  podLogsDir: string;
  /** The host's resolv.conf as text ("" when there is none). */
  hostResolvConf: string;
  /** The pod's cgroup (cgroupfs path, e.g. "/kubepods/burstable/pod<uid>"); "" for none. */
  cgroupParent?: string;
}

/** <podLogsDir>/<namespace>_<name>_<uid> */
export function podLogDirectory(podLogsDir: string, pod: Pod): string {
  const ns = pod.metadata.namespace ?? "default";
  return join(podLogsDir, `${ns}_${pod.metadata.name}_${pod.metadata.uid ?? ""}`);
}

/** spec.hostname, else the pod name cut to 63 characters (no trailing "-" or "."). */
export function podHostname(pod: Pod): string {
  if (pod.spec.hostname) return pod.spec.hostname;
  return pod.metadata.name.slice(0, 63).replace(/[-.]+$/, "");
}

/** nameserver/search/options lines of a resolv.conf text. */
function parseResolvConf(text: string): Required<DNSConfig> {
  const out: Required<DNSConfig> = { servers: [], searches: [], options: [] };
  for (const raw of text.split("\n")) {
    const line = raw.replace(/[#;].*$/, "").trim();
    const [key, ...fields] = line.split(/\s+/);
    if (key === "nameserver" && fields[0]) out.servers.push(fields[0]);
    else if (key === "search") out.searches = fields;
    else if (key === "options") out.options.push(...fields);
  }
  return out;
}

const unique = (items: string[]): string[] => [...new Set(items)];

function mergeOptions(existing: string[], extra: PodDNSConfig["options"]): string[] {
  const byName = new Map<string, string>();
  for (const opt of existing) byName.set(opt.split(":")[0] ?? opt, opt);
  for (const opt of extra ?? []) {
    byName.set(
      opt.name,
      opt.value !== undefined && opt.value !== "" ? `${opt.name}:${opt.value}` : opt.name,
    );
  }
  return [...byName.values()];
}

export function podDNSConfig(pod: Pod, hostResolvConf: string): DNSConfig {
  const base: Required<DNSConfig> =
    pod.spec.dnsPolicy === "None"
      ? { servers: [], searches: [], options: [] }
      : parseResolvConf(hostResolvConf);
  const extra = pod.spec.dnsConfig;
  if (!extra) return base;
  return {
    servers: unique([...base.servers, ...(extra.nameservers ?? [])]),
    searches: unique([...base.searches, ...(extra.searches ?? [])]),
    options: mergeOptions(base.options, extra.options),
  };
}

/** Only ports with a hostPort need a mapping; ports without one are reachable on the pod IP. */
function portMappings(pod: Pod): PortMapping[] {
  const out: PortMapping[] = [];
  for (const c of pod.spec.containers) {
    for (const p of c.ports ?? []) {
      if (!p.hostPort) continue;
      const m: PortMapping = {
        protocol: p.protocol ?? "TCP",
        containerPort: p.containerPort,
        hostPort: p.hostPort,
      };
      if (p.hostIP) m.hostIp = p.hostIP;
      out.push(m);
    }
  }
  return out;
}

export function generateSandboxConfig(
  pod: Pod,
  attempt: number,
  ctx: SandboxConfigContext,
): PodSandboxConfig {
  const sysctls = Object.fromEntries(
    (pod.spec.securityContext?.sysctls ?? []).map((s) => [dottedSysctlName(s.name), s.value]),
  );
  return {
    metadata: {
      name: pod.metadata.name,
      namespace: pod.metadata.namespace ?? "default",
      uid: pod.metadata.uid ?? "",
      attempt,
    },
    hostname: pod.spec.hostNetwork ? "" : podHostname(pod),
    logDirectory: podLogDirectory(ctx.podLogsDir, pod),
    dnsConfig: podDNSConfig(pod, ctx.hostResolvConf),
    portMappings: portMappings(pod),
    labels: sandboxLabels(pod),
    annotations: sandboxAnnotations(pod),
    linux: {
      cgroupParent: ctx.cgroupParent ?? "",
      securityContext: sandboxSecurityContext(pod),
      sysctls,
    },
  };
}

/** Reads the host's resolv.conf; a missing file reads as empty. */
export async function readResolvConf(files: HostFiles, path: string): Promise<string> {
  if (!path) return "";
  try {
    return files.read(path) ?? "";
  } catch (err) {
    throw new Error(`Cannot read resolv.conf ${path}: ${(err as Error).message}`);
  }
}
