// An agent on trial (the launcher started a new version with FLEETLET_TRIAL=<its folder name>)
// says it is healthy by writing `healthy` with that name; the launcher then closes the trial. An
// agent the launcher rolled back to finds `rolled-back` and reports it. docs/agent-updates.md
// says when an agent counts as healthy.
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fsyncFolder, writeFileAtomic } from "../../util/atomic-file.ts";
import { type Clock, sleepQuietly } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import { testPause } from "./test-pause.ts";

export interface TrialWatch {
  /** FLEETLET_TRIAL: the version folder on trial; undefined when not on trial. */
  trial: string | undefined;
  /** The launcher's state folder (updateDir). */
  dir: string;
  clock: Clock;
  logger: Logger;
  /** Whether the agent is healthy now (runtime answered, pods synced, hub reached or away). */
  ready(): boolean | Promise<boolean>;
  /** How often `ready` is asked (default 1 s). */
  periodMs?: number;
  /** Called once `healthy` is written. */
  onHealthy?: () => void;
}

/** Asks `ready` until it says yes, then writes `healthy`; returns at once when not on trial. */
export async function runTrialWatch(w: TrialWatch, signal: AbortSignal): Promise<void> {
  if (w.trial === undefined || w.trial === "") return;
  w.logger.info("this version is on trial: the launcher rolls it back unless it becomes healthy", {
    version: w.trial,
  });
  while (!signal.aborted) {
    if (await w.ready()) {
      testPause("healthy");
      writeFileAtomic(join(w.dir, "healthy"), `${w.trial}\n`, { mode: 0o644 });
      w.logger.info("healthy on trial: told the launcher", { version: w.trial });
      w.onHealthy?.();
      return;
    }
    await sleepQuietly(w.clock, w.periodMs ?? 1000, signal);
  }
}

export interface Rollback {
  from: string;
  to: string;
  reason: string;
}

/** The rollback the launcher recorded, removed once read; undefined when there is none. */
export function takeRollback(dir: string): Rollback | undefined {
  const file = join(dir, "rolled-back");
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return undefined;
  }
  rmSync(file, { force: true });
  fsyncFolder(dir);
  const m = /^from=(\S*) to=(\S*) reason=(.*)$/m.exec(text);
  if (m === null) return { from: "", to: "", reason: text.trim() };
  return { from: m[1] ?? "", to: m[2] ?? "", reason: (m[3] ?? "").trim() };
}
