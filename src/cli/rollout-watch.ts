// `fleetlet rollout status`'s loop, for DaemonSets and agent rollouts alike: it looks at the
// rollout until it is done, failed or the timeout passes, printing kubectl's waiting line each time
// it changes; with --watch=false it looks once.
import { parseDuration } from "../api/duration.ts";
import { CliError } from "./errors.ts";
import type { CliIO } from "./io.ts";

/** What one look at a rollout says; `table` prints its members. */
export type RolloutLook =
  | { done: string }
  | { failed: string; table: () => string }
  | { waiting: string; table: () => string };

export interface WatchFlags {
  watch?: boolean;
  timeout?: string;
  interval?: string;
}

/** Looks with `look` until the rollout is done (0), failed (CliError, after its table), or the
 * timeout passed (CliError); with --watch=false, prints the waiting line and the table once. */
export async function watchRollout(
  io: CliIO,
  f: WatchFlags,
  look: () => Promise<RolloutLook>,
): Promise<number> {
  const deadline =
    io.now() + (f.timeout === undefined ? Number.POSITIVE_INFINITY : parseDuration(f.timeout));
  const every = f.interval === undefined ? 500 : parseDuration(f.interval);
  let last = "";
  for (;;) {
    const l = await look();
    if ("done" in l) {
      io.stdout(l.done);
      return 0;
    }
    if ("failed" in l) {
      io.stdout(l.table());
      throw new CliError(l.failed);
    }
    if (l.waiting !== last) io.stdout(l.waiting);
    last = l.waiting;
    if (f.watch === false) {
      io.stdout(l.table());
      return 0;
    }
    if (io.now() > deadline) throw new CliError(`timed out waiting for the condition`);
    await Bun.sleep(every);
  }
}
