// The CPU manager (policies "none" and "static"): restores its state from the checkpoint at start
// (refusing a corrupt one, or one of another policy), assigns exclusive CPUs at admission, gives
// each container its cpuset at creation, and frees the CPUs of pods that are gone. A checkpoint
// that cannot be written (a full disk) is said, never fatal: the state in memory rules, and the
// write is tried again at each change and each removeStale() (housekeeping) until it works.
import type { Container, Pod } from "../../api/types.ts";
import type { Logger } from "../../util/log.ts";
import { ignoreStateWrites, reportedWrite, type StateWrites } from "../events/state-writes.ts";
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
  /** Where a failed write of the checkpoint is said. */
  stateWrites?: StateWrites;
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
  return new CpuManagerImpl(opts);
}

class CpuManagerImpl implements CpuManager {
  /** The assignments (initial before start()). */
  private current: CpuManagerState;
  /** `current` is not in the checkpoint yet: its write failed. */
  private unsaved = false;

  constructor(private readonly opts: CpuManagerOptions) {
    this.current = initialState(opts.policy, opts.topology);
  }

  state(): CpuManagerState {
    return this.current;
  }

  start(): void {
    const opts = this.opts;
    if (opts.policy === "static" && opts.reserved.length === 0) {
      throw new Error(
        "the static CPU manager policy needs reserved CPUs: set reservedSystemCPUs, or cpu in systemReserved or kubeReserved",
      );
    }
    const restored = readCheckpoint(opts.stateFile);
    if (restored === undefined) {
      this.checkpoint();
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
    this.current = restored;
    opts.logger.info("CPU manager state restored", {
      policy: restored.policyName,
      shared: formatCpuSet(restored.defaultCpuSet),
      pods: Object.keys(restored.entries).length,
    });
  }

  admit(pod: Pod): string | undefined {
    if (this.opts.policy !== "static") return undefined;
    const result = allocatePod(this.current, this.opts.topology, this.opts.reserved, pod);
    if ("error" in result) return result.error;
    this.save(result.state);
    return undefined;
  }

  /** Bound: the CPU reconciler is given this method alone. */
  readonly cpusetFor = (pod: Pod, c: Container): string => {
    if (this.opts.policy !== "static") return "";
    return formatCpuSet(containerCpuSet(this.current, pod.metadata.uid ?? "", c.name));
  };

  removeStale(keep: (uid: string) => boolean): void {
    let next = this.current;
    for (const uid of Object.keys(this.current.entries)) {
      if (!keep(uid)) next = releasePod(next, uid);
    }
    this.save(next);
  }

  /** Makes `next` current and checkpoints it when it differs, or when a write is owed. */
  private save(next: CpuManagerState): void {
    if (next === this.current && !this.unsaved) return;
    this.current = next;
    this.checkpoint();
  }

  private checkpoint(): void {
    const file = this.opts.stateFile;
    try {
      reportedWrite(this.opts.stateWrites ?? ignoreStateWrites, file, () =>
        writeCheckpoint(file, this.current),
      );
      this.unsaved = false;
    } catch (err) {
      if (!this.unsaved)
        this.opts.logger.warn("cannot write the CPU manager checkpoint", { error: err });
      this.unsaved = true;
    }
  }
}
