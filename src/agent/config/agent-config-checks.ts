// The agent config's checks once file, flags and defaults are merged: the hub URL's transport
// (docs/protocol.md, "TLS and trust") and the rules between fields. Each throws ConfigError
// naming the file or flag, the field and the value.
import { isDNS1123Subdomain } from "../../api/index.ts";
import { buildThresholds } from "../evictionapi/thresholds.ts";
import type { AgentConfig } from "./agent-config.ts";
import { showValue } from "./agent-config-schema.ts";
import { ConfigError } from "./agent-flags.ts";

/** Whether `host` (a URL's hostname) is loopback. */
function loopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "");
  return h === "localhost" || h === "::1" || /^127\./.test(h);
}

/** A plain (not TLS) hub URL is refused unless it is loopback or hub.insecure says so
 * (docs/protocol.md, "TLS and trust"). */
export function checkHubUrl(hub: { urls: string[]; insecure?: boolean }, where: string): void {
  for (const url of hub.urls) {
    const u = new URL(url);
    const plain = u.protocol === "http:" || u.protocol === "ws:";
    if (plain && !loopbackHost(u.hostname) && hub.insecure !== true)
      throw new ConfigError(
        `${where}: hub.url ${showValue(url)} is not TLS and not loopback: exec sessions, port-forwards and pod logs would travel unencrypted; use https:// (the hub serves TLS by default), or set hub.insecure: true to accept that`,
      );
  }
}

/** Whether the agent's hub URL is plain and not loopback (allowed by hub.insecure: warn). */
export function insecureHubUrl(url: string): boolean {
  const u = new URL(url);
  return (u.protocol === "http:" || u.protocol === "ws:") && !loopbackHost(u.hostname);
}

/** Checks between fields, once file, flags and defaults are merged. */
export function checkRelations(config: AgentConfig, where: string): void {
  for (const kind of ["crashLoopBackOff", "imagePullBackOff", "hubReconnectBackOff"] as const) {
    const base = config[`${kind}Base`];
    const max = config[`${kind}Max`];
    if (base > max) {
      throw new ConfigError(
        `${where}: ${kind}Base (${base}ms) must not be greater than ${kind}Max (${max}ms)`,
      );
    }
  }
  const low = config.imageGCLowThresholdPercent;
  const high = config.imageGCHighThresholdPercent;
  if (low >= high) {
    throw new ConfigError(
      `${where}: imageGCLowThresholdPercent (${low}) must be less than imageGCHighThresholdPercent (${high})`,
    );
  }
  const { imageMaximumGCAge: maxAge, imageMinimumGCAge: minAge } = config;
  if (maxAge !== 0 && maxAge <= minAge) {
    throw new ConfigError(
      `${where}: imageMaximumGCAge (${maxAge}ms) must be greater than imageMinimumGCAge (${minAge}ms), or 0`,
    );
  }
  checkPulls(config, where);
  try {
    buildThresholds(config, { podCgroups: config.cgroupsPerQOS });
  } catch (err) {
    throw new ConfigError(`${where}: ${(err as Error).message}`);
  }
  const nameErrors = isDNS1123Subdomain(config.nodeName);
  if (nameErrors.length > 0) {
    throw new ConfigError(
      `${where}: nodeName: ${showValue(config.nodeName)} is not a valid node name (set nodeName or --node-name): ${nameErrors.join("; ")}`,
    );
  }
}

/** The image pull settings between them: the kubelet's rule, and a bucket that would never
 * let a pull begin (docs/kubelet-differences.md, "Image pulls"). */
function checkPulls(config: AgentConfig, where: string): void {
  const max = config.maxParallelImagePulls;
  if (config.serializeImagePulls && max !== undefined && max > 1) {
    throw new ConfigError(
      `${where}: maxParallelImagePulls (${max}) cannot be larger than 1 unless serializeImagePulls (--serialize-image-pulls) is set to false`,
    );
  }
  if (config.registryPullQPS > 0 && config.registryBurst === 0) {
    throw new ConfigError(
      `${where}: registryBurst (--registry-burst) 0 with registryPullQPS (--registry-qps) ${config.registryPullQPS} would refuse every pull: set registryBurst to 1 or more, or registryPullQPS to 0 (no limit)`,
    );
  }
}
