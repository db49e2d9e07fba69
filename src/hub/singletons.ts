// The hub's singletons under its leadership (leader.ts; docs/hub-replicas.md, "Singletons"):
// the deployer's passes and the agent rollouts' passes run only while this hub leads, in the
// term they loaded the store in (each asks before it plans, and its writes are refused in their
// transaction once the lead was lost). A replica that takes the lead first loads what the last
// leader stored, so the rollouts go on from where they stood. What concerns only a replica's own
// connections (marking its silent agents offline, closing those whose credential expired) and
// its own serving certificate runs on every replica; a join token's expiry is checked where the
// token is used, by whichever replica.
import { type Clock, sleepQuietly } from "../util/clock.ts";
import type { Logger } from "../util/log.ts";
import type { Deployer } from "./deploy/deployer.ts";
import type { Leadership } from "./leader.ts";
import type { AgentRollouts } from "./rollouts/index.ts";

interface Singletons {
  deployer: Pick<Deployer, "reload">;
  rollouts: Pick<AgentRollouts, "reload">;
  clock: Clock;
  log: Logger;
}

/** Time between tries to load the store when the lead was taken and a load failed. */
const RETRY_MS = 2000;

/** Loads the store into the singletons for the term `term`, tried again while it still leads. */
async function reloadFor(
  leadership: Leadership,
  term: number | undefined,
  s: Singletons,
  signal: AbortSignal,
): Promise<void> {
  while (!signal.aborted && term !== undefined && leadership.term() === term) {
    try {
      await s.deployer.reload();
      await s.rollouts.reload();
      return;
    } catch (error) {
      s.log.error("cannot load what the last leader stored; trying again", {
        error: String(error),
      });
      await sleepQuietly(s.clock, RETRY_MS, signal);
    }
  }
}

/** Runs the election until `signal`; each time this hub takes the lead, its singletons load
 * the store. */
export function runSingletons(leadership: Leadership, s: Singletons, signal: AbortSignal): void {
  leadership.onChange((leading) => {
    if (leading) void reloadFor(leadership, leadership.term(), s, signal);
  });
  void leadership.run(signal);
}
