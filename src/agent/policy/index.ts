// The device's policy for pods from the hub (docs/deploy.md, "Device policy"): an admission
// check that refuses a hub pod breaking the agent's own hubPodPolicy, with reason DevicePolicy
// and a message naming each field and setting. Pods of the manifest folder are never checked.
import { posix } from "node:path";
import type { Container, Pod } from "../../api/types.ts";
import type { HubPodPolicy } from "../config/index.ts";
import { parseImageReference } from "../images/reference.ts";
import { CONFIG_SOURCE_ANNOTATION } from "../sources/index.ts";

/** The admission reason of a refused hub pod. */
const POLICY_REASON = "DevicePolicy";

export interface PolicyAdmission {
  /** Why `pod` may not run next to the `active` pods, or undefined (file pods always pass). */
  admit(pod: Pod, active: readonly Pod[]): { reason: string; message: string } | undefined;
}

/** Whether the pod came from the hub (the "api" pod source). */
function isHubPod(pod: Pod): boolean {
  return pod.metadata.annotations?.[CONFIG_SOURCE_ANNOTATION] === "api";
}

/** The capabilities a container has by default in containerd (and Docker): adding one of them
 * gives nothing more, so the Pod Security Standards' baseline allows it, and so do we. */
const DEFAULT_CAPABILITIES = new Set([
  "AUDIT_WRITE",
  "CHOWN",
  "DAC_OVERRIDE",
  "FOWNER",
  "FSETID",
  "KILL",
  "MKNOD",
  "NET_BIND_SERVICE",
  "SETFCAP",
  "SETGID",
  "SETPCAP",
  "SETUID",
  "SYS_CHROOT",
]);

/** "cap_net_admin" → "NET_ADMIN", as the runtime reads a capability's name. */
function capabilityName(name: string): string {
  return name.toUpperCase().replace(/^CAP_/, "");
}

/** The capabilities `c` adds that are neither default nor allowed, as written. */
function deniedCapabilities(c: Container, policy: HubPodPolicy): string[] {
  const allowed = new Set(policy.allowedCapabilities.map(capabilityName));
  if (allowed.has("ALL")) return [];
  return (c.securityContext?.capabilities?.add ?? []).filter((name) => {
    const cap = capabilityName(name);
    return !DEFAULT_CAPABILITIES.has(cap) && !allowed.has(cap);
  });
}

function under(path: string, prefix: string): boolean {
  const p = posix.normalize(prefix).replace(/\/+$/, "");
  return p === "" || path === p || path.startsWith(`${p}/`);
}

function containerViolations(pod: Pod, policy: HubPodPolicy): string[] {
  const out: string[] = [];
  const lists: [string, Container[]][] = [
    ["initContainers", pod.spec.initContainers ?? []],
    ["containers", pod.spec.containers],
  ];
  for (const [field, list] of lists) {
    list.forEach((c, i) => {
      const at = `spec.${field}[${i}]`;
      if (c.securityContext?.privileged === true && !policy.allowPrivileged)
        out.push(
          `${at}.securityContext.privileged: privileged containers are not allowed (hubPodPolicy.allowPrivileged is false)`,
        );
      const denied = deniedCapabilities(c, policy);
      if (denied.length > 0)
        out.push(
          `${at}.securityContext.capabilities.add: ${denied.join(", ")} not allowed (hubPodPolicy.allowedCapabilities: ${JSON.stringify(policy.allowedCapabilities)})`,
        );
      if (policy.allowedRegistries.length === 0) return;
      let domain: string;
      try {
        domain = parseImageReference(c.image).domain;
      } catch {
        return; // the runtime refuses it with InvalidImageName
      }
      if (!policy.allowedRegistries.includes(domain))
        out.push(
          `${at}.image: registry "${domain}" of ${JSON.stringify(c.image)} is not allowed (hubPodPolicy.allowedRegistries: ${JSON.stringify(policy.allowedRegistries)})`,
        );
    });
  }
  return out;
}

/** Every way `pod` breaks `policy`, one message each; empty when it complies. */
export function policyViolations(pod: Pod, policy: HubPodPolicy): string[] {
  const out: string[] = [];
  const spec = pod.spec;
  const host = [
    ["hostNetwork", "allowHostNetwork", "the host's network"],
    ["hostPID", "allowHostPID", "the host's PID namespace"],
    ["hostIPC", "allowHostIPC", "the host's IPC namespace"],
  ] as const;
  for (const [field, setting, what] of host) {
    if (spec[field] === true && !policy[setting])
      out.push(`spec.${field}: hub pods may not use ${what} (hubPodPolicy.${setting} is false)`);
  }
  out.push(...containerViolations(pod, policy));
  (spec.volumes ?? []).forEach((v, i) => {
    if (v.hostPath === undefined) return;
    const path = posix.normalize(v.hostPath.path);
    if (policy.allowedHostPathPrefixes.some((p) => under(path, p))) return;
    const allowed =
      policy.allowedHostPathPrefixes.length === 0
        ? "hubPodPolicy.allowedHostPathPrefixes is empty: no hostPath volumes"
        : `hubPodPolicy.allowedHostPathPrefixes: ${JSON.stringify(policy.allowedHostPathPrefixes)}`;
    out.push(
      `spec.volumes[${i}].hostPath.path: ${JSON.stringify(v.hostPath.path)} is not under an allowed prefix (${allowed})`,
    );
  });
  return out;
}

export function createPolicyAdmission(policy: HubPodPolicy): PolicyAdmission {
  return {
    admit(pod, active) {
      if (!isHubPod(pod)) return undefined;
      const problems = policyViolations(pod, policy);
      const running = active.filter((p) => isHubPod(p) && p.metadata.uid !== pod.metadata.uid);
      if (running.length >= policy.maxPods)
        problems.push(
          `this device runs at most ${policy.maxPods} hub pods (hubPodPolicy.maxPods), and ${running.length} run`,
        );
      if (problems.length === 0) return undefined;
      return {
        reason: POLICY_REASON,
        message: `hub pod breaks this device's policy: ${problems.join("; ")}`,
      };
    },
  };
}
