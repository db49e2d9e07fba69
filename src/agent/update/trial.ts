// An agent on trial (the launcher started a new version with FLEETLET_TRIAL=<its folder name>)
// says it is healthy by writing `healthy` with that name; the launcher then closes the trial. An
// agent the launcher rolled back to finds `rolled-back`, reports it, and remembers the release so
// as not to take it again. docs/agent-updates.md says when an agent counts as healthy.
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

/** The releases this device was rolled back from, newest last: `<folder name> <reason>` lines. */
const ROLLED_BACK_FROM = "rolled-back-from";
/** How many of them are remembered. */
const REMEMBERED = 20;

function rolledBackFrom(dir: string): Map<string, string> {
  let text = "";
  try {
    text = readFileSync(join(dir, ROLLED_BACK_FROM), "utf8");
  } catch {
    return new Map();
  }
  const entries = text
    .split("\n")
    .map((line) => /^(\S+) (.*)$/.exec(line))
    .filter((m) => m !== null)
    .map((m): [string, string] => [m[1] ?? "", m[2] ?? ""]);
  return new Map(entries);
}

/** Why the launcher rolled this device back from release folder `name`, if it ever did: such a
 * release is not taken again (it would fail the same way, and a rollout counts the refusal). */
export function rolledBackReason(dir: string, name: string): string | undefined {
  return rolledBackFrom(dir).get(name);
}

/**
 * The rollback the launcher recorded, removed once read (and its release remembered first, so
 * that it is not taken again); undefined when there is none.
 */
export function takeRollback(dir: string): Rollback | undefined {
  const file = join(dir, "rolled-back");
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return undefined;
  }
  const m = /^from=(\S*) to=(\S*) reason=(.*)$/m.exec(text);
  const rollback =
    m === null
      ? { from: "", to: "", reason: text.trim() }
      : { from: m[1] ?? "", to: m[2] ?? "", reason: (m[3] ?? "").trim() };
  if (rollback.from !== "") {
    const known = rolledBackFrom(dir);
    known.delete(rollback.from);
    known.set(rollback.from, rollback.reason.replace(/\s+/g, " ") || "rolled back");
    const lines = [...known].slice(-REMEMBERED).map(([name, why]) => `${name} ${why}\n`);
    writeFileAtomic(join(dir, ROLLED_BACK_FROM), lines.join(""), { mode: 0o644 });
  }
  rmSync(file, { force: true });
  fsyncFolder(dir);
  return rollback;
}
