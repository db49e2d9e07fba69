// The faults a soak injects into its world, each undone by heal(): the agent killed with
// SIGKILL, containerd killed and started again, the hub killed (and kept away long enough for the
// agent's outbox to overflow), the agent's root filesystem filled, the agent's clock stepped.
import { rmSync } from "node:fs";
import { join } from "node:path";
import type { SoakWorld } from "./world.ts";

export type FaultKind =
  | "agent-kill"
  | "containerd-restart"
  | "hub-restart"
  | "hub-away"
  | "disk-full"
  | "clock-step";

export const FAULT_KINDS: FaultKind[] = [
  "agent-kill",
  "containerd-restart",
  "hub-restart",
  "hub-away",
  "disk-full",
  "clock-step",
];

/** What is broken now, so that the quiet period can mend it. */
export class Faults {
  private hubDown = false;
  private agentDown = false;
  private diskFull = false;
  /** Times the agent was (re)started by a fault; the model forgets what it saw each time. */
  agentStarts = 0;

  constructor(
    private readonly world: SoakWorld,
    private readonly rand: () => number,
  ) {}

  private get fillFile(): string {
    return join(this.world.agent.rootDir, "soak-fill");
  }

  /** Injects one fault of `kind`; returns a line saying what was done. */
  async inject(kind: FaultKind): Promise<string> {
    const w = this.world;
    switch (kind) {
      case "agent-kill": {
        await w.agent.stop("SIGKILL");
        this.agentDown = true;
        // Sometimes back at once, sometimes after a while; heal() brings it back at the latest.
        if (this.rand() < 0.6) await this.startAgent();
        return "agent killed (SIGKILL)";
      }
      case "containerd-restart":
        await w.containerd.restart();
        return "containerd killed (SIGKILL) and started";
      case "hub-restart":
        await w.hub.kill();
        await w.hub.start(60_000);
        this.hubDown = false;
        return "hub killed (SIGKILL) and started";
      case "hub-away":
        if (!this.hubDown) await w.hub.kill();
        this.hubDown = true;
        return "hub killed and kept away";
      case "disk-full":
        this.fill();
        return `agent root filesystem filled (${w.rootFree()} B left)`;
      case "clock-step": {
        const hours = (this.rand() * 12 - 6) * (this.rand() < 0.5 ? 1 : 1 / 60);
        const next = Math.round(Math.max(-86_400, Math.min(86_400, hours * 3600)));
        const was = w.clockOffsetSeconds;
        w.stepClock(next);
        return `agent clock stepped from ${was} s to ${next} s`;
      }
    }
  }

  private fill(): void {
    const free = this.world.rootFree();
    Bun.spawnSync(["fallocate", "-l", String(free), this.fillFile]);
    // What fallocate could not take (metadata blocks), dd takes until ENOSPC.
    Bun.spawnSync(["dd", "if=/dev/zero", `of=${this.fillFile}-2`, "bs=4k"], { stderr: "ignore" });
    this.diskFull = true;
  }

  private async startAgent(): Promise<void> {
    await this.world.agent.start();
    this.agentDown = false;
    this.agentStarts++;
  }

  /** Mends every fault still in force: space freed, hub and agent running. */
  async heal(): Promise<string[]> {
    const done: string[] = [];
    if (this.diskFull) {
      rmSync(this.fillFile, { force: true });
      rmSync(`${this.fillFile}-2`, { force: true });
      this.diskFull = false;
      done.push("root filesystem space freed");
    }
    if (this.hubDown) {
      await this.world.hub.start(60_000);
      this.hubDown = false;
      done.push("hub started");
    }
    if (this.agentDown) {
      await this.startAgent();
      done.push("agent started");
    }
    return done;
  }
}
