// Sysctl admission (docs/kubelet-differences.md, "Sysctls"): a pod may set only the safe sysctls
// of the running kernel and those the device's allowedUnsafeSysctls allows (exact names and
// "prefix*" patterns of namespaced groups). A pod setting any other is rejected with reason
// SysctlForbidden before it runs, as is a pod setting a net.* sysctl on the host network or an
// IPC one with the host's IPC namespace: the value would change the host's own. Names may be
// written with "." or "/" separators; they are compared in their dotted form.
import type { Pod } from "../../api/types.ts";
import type { Logger } from "../../util/log.ts";
import { dottedSysctlName, type SysctlNamespace, sysctlNamespace } from "./names.ts";
import { KERNEL_RELEASE_FILE, parseKernelRelease, safeSysctls } from "./safe.ts";

export { dottedSysctlName, sysctlNamespace, sysctlPatternProblem } from "./names.ts";
export { KERNEL_RELEASE_FILE, parseKernelRelease, SAFE_SYSCTLS, safeSysctls } from "./safe.ts";

/** The admission reason of a pod setting a sysctl it may not. */
const SYSCTL_FORBIDDEN_REASON = "SysctlForbidden";

export interface SysctlAdmission {
  /** Why `pod` may not run for its sysctls, or undefined. */
  admit(pod: Pod): { reason: string; message: string } | undefined;
  /** The allowed names and patterns, safe ones first. */
  readonly allowlist: readonly string[];
}

export interface SysctlAdmissionDeps {
  /** Patterns of allowedUnsafeSysctls, already checked at config load. */
  allowedUnsafeSysctls: readonly string[];
  /** The running kernel's release (the text of /proc/sys/kernel/osrelease); throws if unreadable. */
  kernelRelease(): string;
  log: Logger;
}

/** The kernel release as numbers, or undefined (logged) when it cannot be read or parsed. */
function runningKernel(deps: SysctlAdmissionDeps): number[] | undefined {
  let text: string;
  try {
    text = deps.kernelRelease();
  } catch (err) {
    deps.log.error(
      "cannot read the kernel release: sysctls safe only on newer kernels are not allowed",
      {
        file: KERNEL_RELEASE_FILE,
        error: (err as Error).message,
      },
    );
    return undefined;
  }
  const kernel = parseKernelRelease(text);
  if (kernel === undefined)
    deps.log.error(
      "cannot parse the kernel release: sysctls safe only on newer kernels are not allowed",
      {
        release: text.trim(),
      },
    );
  return kernel;
}

export function createSysctlAdmission(deps: SysctlAdmissionDeps): SysctlAdmission {
  const kernel = runningKernel(deps);
  const { safe, tooOld } = safeSysctls(kernel);
  for (const name of tooOld)
    deps.log.info("kernel too old: sysctl left out of the safe sysctls", {
      sysctl: name,
      kernel: kernel?.join("."),
    });
  const allowlist = [...safe, ...deps.allowedUnsafeSysctls];
  const names = new Map<string, SysctlNamespace | undefined>();
  const prefixes: [string, SysctlNamespace | undefined][] = [];
  for (const pattern of allowlist) {
    const dotted = dottedSysctlName(pattern);
    if (dotted.endsWith("*")) {
      const prefix = dotted.slice(0, -1);
      prefixes.push([prefix, sysctlNamespace(prefix)]);
    } else names.set(dotted, sysctlNamespace(dotted));
  }

  /** Why the dotted sysctl may not be set by this pod, or undefined. */
  function problem(name: string, hostNetwork: boolean, hostIPC: boolean): string | undefined {
    const entry = names.has(name)
      ? ([name, names.get(name)] as const)
      : prefixes.find(([prefix]) => name.startsWith(prefix));
    if (entry === undefined) return `${JSON.stringify(name)} not allowlisted`;
    const ns = entry[1];
    if ((ns === "ipc" && hostIPC) || (ns === "net" && hostNetwork))
      return `${JSON.stringify(name)} not allowed with host ${ns} enabled`;
    return undefined;
  }

  return {
    allowlist,
    admit(pod) {
      for (const s of pod.spec.securityContext?.sysctls ?? []) {
        const why = problem(
          dottedSysctlName(s.name),
          pod.spec.hostNetwork === true,
          pod.spec.hostIPC === true,
        );
        if (why !== undefined)
          return { reason: SYSCTL_FORBIDDEN_REASON, message: `forbidden sysctl: ${why}` };
      }
      return undefined;
    },
  };
}
