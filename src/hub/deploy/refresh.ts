// At a hub replica that does not lead (docs/hub-replicas.md, "Singletons"), the devices whose
// agents it holds are sent the desired state the leader decided: built from the assignments the
// leader stored, which this replica reads from the store when the leader raised a device's
// generation or an agent is welcomed. One load at a time: the devices asked for while a load is
// under way are taken by the next one.
import { type Clock, sleepQuietly } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import type { DeployState } from "./store.ts";

/** Devices to send: node → the generation its agent runs, when it was just welcomed. */
export type RefreshNodes = ReadonlyMap<string, number | undefined>;

export interface RefreshDeps {
  load(): Promise<DeployState>;
  /** Takes what was loaded and sends the devices their desired state. */
  take(loaded: DeployState, nodes: RefreshNodes): Promise<void>;
  clock: Clock;
  log: Logger;
  /** The pause before a load that failed is tried again. */
  retryMs: number;
}

export class DesiredRefresh {
  private readonly waiting = new Map<string, number | undefined>();
  private running = false;
  private stopped = false;

  constructor(private readonly deps: RefreshDeps) {}

  /** Asks for `node` to be sent its desired state after the next load; `agentGeneration`: the
   * generation its agent said it runs (welcome), kept until that load. */
  ask(node: string, agentGeneration?: number): void {
    if (this.stopped) return;
    this.waiting.set(node, agentGeneration ?? this.waiting.get(node));
    if (!this.running) void this.run();
  }

  /** Loads nothing more (the hub stops). */
  stop(): void {
    this.stopped = true;
    this.waiting.clear();
  }

  private async run(): Promise<void> {
    this.running = true;
    while (this.waiting.size > 0 && !this.stopped) {
      const nodes = new Map(this.waiting);
      this.waiting.clear();
      try {
        await this.deps.take(await this.deps.load(), nodes);
      } catch (error) {
        this.deps.log.warn("cannot read the desired states the leader stored; trying again", {
          error: String(error),
        });
        for (const [node, g] of nodes) this.waiting.set(node, this.waiting.get(node) ?? g);
        await sleepQuietly(this.deps.clock, this.deps.retryMs);
      }
    }
    this.running = false;
  }
}
