// Sysctl names as the kubelet reads them: written with "." or "/" separators, the kernel
// namespace that isolates a name (if any is known), and the syntax of an allowlist pattern
// (an exact name, or a prefix ending in "*").

/** A kernel namespace that isolates a sysctl per pod. */
export type SysctlNamespace = "ipc" | "net";

/** The longest sysctl name or pattern. */
const SYSCTL_MAX_LENGTH = 253;

/**
 * The name with "." separators (sysctl.d(5)): a name whose first separator is "/" has every "/"
 * and "." swapped ("net/ipv4/conf/eth0.100/rp_filter" → "net.ipv4.conf.eth0/100.rp_filter");
 * a name whose first separator is "." is kept as written.
 */
export function dottedSysctlName(name: string): string {
  const first = name.search(/[./]/);
  if (first < 0 || name[first] === ".") return name;
  return name.replace(/[./]/g, (c) => (c === "." ? "/" : "."));
}

/** Names isolated by a namespace on their own, then groups by prefix. */
const NAMESPACED_NAMES: ReadonlyMap<string, SysctlNamespace> = new Map([["kernel.sem", "ipc"]]);
const NAMESPACED_PREFIXES: readonly [string, SysctlNamespace][] = [
  ["kernel.shm", "ipc"],
  ["kernel.msg", "ipc"],
  ["fs.mqueue.", "ipc"],
  ["net.", "net"],
];

/** What a config error lists as the namespaced groups. */
const NAMESPACED_GROUPS = "kernel.shm*, kernel.msg*, kernel.sem, fs.mqueue.* and net.*";

/** The namespace isolating a dotted name (or a pattern's prefix), or undefined if none is known. */
export function sysctlNamespace(dotted: string): SysctlNamespace | undefined {
  const exact = NAMESPACED_NAMES.get(dotted);
  if (exact !== undefined) return exact;
  return NAMESPACED_PREFIXES.find(([prefix]) => dotted.startsWith(prefix))?.[1];
}

const SEGMENT = "[a-z0-9]([-_a-z0-9]*[a-z0-9])?";
/** Segments separated by "." or "/", the last one possibly ending in "*". */
const PATTERN = new RegExp(`^(${SEGMENT}[./])*([a-z0-9][-_a-z0-9]*)?[a-z0-9*]$`);

/**
 * Why `pattern` cannot be in an allowlist of sysctls, or undefined: it must be a sysctl name or a
 * prefix ending in "*" (at most 253 characters, lowercase segments separated by "." or "/"), and
 * name (or start) a group the kernel isolates per pod.
 */
export function sysctlPatternProblem(pattern: string): string | undefined {
  if (pattern.length > SYSCTL_MAX_LENGTH || !PATTERN.test(pattern)) {
    return `is not a sysctl name or a prefix ending in "*" (at most ${SYSCTL_MAX_LENGTH} characters, lowercase segments separated by "." or "/")`;
  }
  const dotted = dottedSysctlName(pattern);
  const prefix = dotted.endsWith("*") ? dotted.slice(0, -1) : dotted;
  if (sysctlNamespace(prefix) === undefined) {
    return `is not known to be namespaced: only ${NAMESPACED_GROUPS} can be allowed`;
  }
  return undefined;
}
