// What the local API server needs from the agent: narrow functions, each answered from the
// status manager's and runtime's current view.
import type { Node } from "../../api/node.ts";
import type { Event, Pod } from "../../api/types.ts";

export interface ExecResult {
  stdout: string;
  stderr: string;
  exitCode: number;
}

interface Health {
  ok: boolean;
  /** Why the agent is not healthy, one short sentence each; empty when ok. */
  reasons: string[];
}

export interface ServerDeps {
  /** Every pod the agent runs, full v1 objects with status. */
  listPods(): Pod[];
  getPod(namespace: string, name: string): Pod | undefined;
  /** Calls `listener` soon after a pod or its status may have changed (pod watches); returns
   * the function that stops it. Without it, watches only look every resync period. */
  onPodsChanged?(listener: () => void): () => void;
  /** The CRI log file of a container (its previous run with `previous`); undefined if none. */
  logPath(pod: Pod, container: string, previous: boolean): string | undefined;
  /** Runs `cmd` in a running container; timeoutSec 0 means no timeout. Rejects on failure. */
  exec(pod: Pod, container: string, cmd: string[], timeoutSec: number): Promise<ExecResult>;
  events(): Event[];
  healthy(): Health;
  /** All metrics in the Prometheus text format. */
  metrics(): string;
  /** This agent's v1 Node; absent when node status is not running. */
  node?(): Node;
}
