// The CPU manager (policies "none" and "static"): restores its state from the checkpoint at start
// (refusing a corrupt one, or one of another policy), assigns exclusive CPUs at admission, gives
// each container its cpuset at creation, and frees the CPUs of pods that are gone.
import type { Container, Pod } from "../../api/types.ts";
import type { Logger } from "../../util/log.ts";
import { readCheckpoint, writeCheckpoint } from "./cpu-checkpoint.ts";
import {
  allocatePod,
  type CpuManagerState,
  type CpuPolicyName,
  containerCpuSet,
  initialState,
  releasePod,
  validateState,
} from "./cpu-static.ts";
import type { CpuTopology } from "./cpu-topology.ts";
import { type CpuSet, formatCpuSet } from "./cpuset.ts";

export interface CpuManagerOptions {
  policy: CpuPolicyName;
  topology: CpuTopology;
  /** Reserved CPUs (static policy; must not be empty). */
  reserved: CpuSet;
  stateFile: string;
  logger: Logger;
}

export interface CpuManager {
  /** Restores (or creates) the state; throws with a clear message when it cannot be used. */
  start(): void;
  /** Assigns exclusive CPUs for the pod; returns why it cannot, or undefined. */
  admit(pod: Pod): string | undefined;
  /** The container's cpuset ("" under the none policy: the runtime decides). */
  cpusetFor(pod: Pod, c: Container): string;
  /** Frees the CPUs of pods not in `keep`. */
  removeStale(keep: (uid: string) => boolean): void;
  state(): CpuManagerState;
}

export function createCpuManager(opts: CpuManagerOptions): CpuManager {
  let state = initialState(opts.policy, opts.topology);
  const save = (next: CpuManagerState) => {
    if (next === state) return;
    writeCheckpoint(opts.stateFile, next);
    state = next;
  };

  return {
    state: () => state,

    start() {
      if (opts.policy === "static" && opts.reserved.length === 0) {
        throw new Error(
          "the static CPU manager policy needs reserved CPUs: set reservedSystemCPUs, or cpu in systemReserved or kubeReserved",
        );
      }
      const restored = readCheckpoint(opts.stateFile);
      if (restored === undefined) {
        writeCheckpoint(opts.stateFile, state);
        return;
      }
      if (restored.policyName !== opts.policy) {
        throw new Error(
          `the configured CPU manager policy ${JSON.stringify(opts.policy)} differs from ${JSON.stringify(restored.policyName)} in the checkpoint ${opts.stateFile}: stop this node's pods and delete the file before starting the agent again`,
        );
      }
      const invalid = validateState(restored, opts.topology, opts.reserved);
      if (invalid !== undefined) {
        throw new Error(
          `the CPU manager checkpoint ${opts.stateFile} does not fit this machine: ${invalid}; stop this node's pods and delete the file before starting the agent again`,
        );
      }
      state = restored;
      opts.logger.info("CPU manager state restored", {
        policy: state.policyName,
        shared: formatCpuSet(state.defaultCpuSet),
        pods: Object.keys(state.entries).length,
      });
    },

    admit(pod) {
      if (opts.policy !== "static") return undefined;
      const result = allocatePod(state, opts.topology, opts.reserved, pod);
      if ("error" in result) return result.error;
      save(result.state);
      return undefined;
    },

    cpusetFor(pod, c) {
      if (opts.policy !== "static") return "";
      return formatCpuSet(containerCpuSet(state, pod.metadata.uid ?? "", c.name));
    },

    removeStale(keep) {
      let next = state;
      for (const uid of Object.keys(state.entries)) if (!keep(uid)) next = releasePod(next, uid);
      save(next);
    },
  };
}
