// Pod and container security contexts mapped to CRI, as kubelet maps them: the container's
// settings override the pod's; capabilities go without the "CAP_" prefix (containerd adds it);
// allowPrivilegeEscalation: false sets no_new_privs; namespaces follow hostNetwork/hostPID/hostIPC.

import type { Container, Pod } from "../../api/types.ts";
import type {
  LinuxContainerSecurityContext,
  LinuxSandboxSecurityContext,
  NamespaceOption,
} from "../../cri/index.ts";

function namespaceOptions(pod: Pod): NamespaceOption {
  return {
    network: pod.spec.hostNetwork ? "NODE" : "POD",
    pid: pod.spec.hostPID ? "NODE" : "CONTAINER",
    ipc: pod.spec.hostIPC ? "NODE" : "POD",
  };
}

/** "cap_net_admin" or "NET_ADMIN" → "NET_ADMIN". */
function normalizeCapability(name: string): string {
  const upper = name.trim().toUpperCase();
  return upper.startsWith("CAP_") ? upper.slice(4) : upper;
}

function supplementalGroups(pod: Pod): number[] {
  const psc = pod.spec.securityContext;
  const groups = [...(psc?.supplementalGroups ?? [])];
  if (psc?.fsGroup !== undefined && !groups.includes(psc.fsGroup)) groups.push(psc.fsGroup);
  return groups;
}

export function sandboxSecurityContext(pod: Pod): LinuxSandboxSecurityContext {
  const psc = pod.spec.securityContext;
  const out: LinuxSandboxSecurityContext = { namespaceOptions: namespaceOptions(pod) };
  if (psc?.runAsUser !== undefined) out.runAsUser = { value: psc.runAsUser };
  if (psc?.runAsGroup !== undefined) out.runAsGroup = { value: psc.runAsGroup };
  const groups = supplementalGroups(pod);
  if (groups.length) out.supplementalGroups = groups;
  const all = [...pod.spec.containers, ...(pod.spec.initContainers ?? [])];
  if (all.some((c) => c.securityContext?.privileged)) out.privileged = true;
  return out;
}

export function containerSecurityContext(pod: Pod, c: Container): LinuxContainerSecurityContext {
  const psc = pod.spec.securityContext;
  const sc = c.securityContext;
  const out: LinuxContainerSecurityContext = { namespaceOptions: namespaceOptions(pod) };
  const runAsUser = sc?.runAsUser ?? psc?.runAsUser;
  const runAsGroup = sc?.runAsGroup ?? psc?.runAsGroup;
  if (runAsUser !== undefined) out.runAsUser = { value: runAsUser };
  if (runAsGroup !== undefined) out.runAsGroup = { value: runAsGroup };
  const groups = supplementalGroups(pod);
  if (groups.length) out.supplementalGroups = groups;
  if (sc?.privileged) out.privileged = true;
  if (sc?.readOnlyRootFilesystem) out.readonlyRootfs = true;
  if (sc?.allowPrivilegeEscalation === false) out.noNewPrivs = true;
  if (sc?.capabilities) {
    out.capabilities = {
      addCapabilities: (sc.capabilities.add ?? []).map(normalizeCapability),
      dropCapabilities: (sc.capabilities.drop ?? []).map(normalizeCapability),
    };
  }
  return out;
}
