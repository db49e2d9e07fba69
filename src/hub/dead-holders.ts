// A node whose holder replica died (docs/hub-replicas.md, "Agents and replicas"): every replica
// counts up its beat in the store (pg/replicas.ts) and watches the others'; the leader releases
// the nodes held by a process whose beat has not moved for longer than the offline threshold
// (or that has no row): their sessions end and those stored online are stored offline, as a
// single hub marks a silent node offline. A replica only slow (stopped for less than the
// threshold) keeps its nodes. Times are measured on this replica's monotonic clock from when it
// saw a beat change, so replicas' clocks need not agree.
import type { Clock } from "../util/clock.ts";
import type { Logger } from "../util/log.ts";
import type { Leadership } from "./leader.ts";
import type { Released } from "./pg/replicas.ts";

/** The store's side (PostgreSQL only). */
export interface ReplicaBeats {
  /** This process's origin, as its sessions and beat name it. */
  readonly origin: string;
  /** Counts up this process's beat (`replica`: its name) at `now`; gives every process's beat. */
  beat(replica: string, now: number): Promise<Map<string, number>>;
  /** The processes named as holders by node sessions. */
  holderOrigins(): Promise<string[]>;
  /** Releases what the processes of `dead` held (origin → the beat judged; undefined: no row),
   * in a transaction fenced by the leader lock. */
  releaseDead(dead: ReadonlyMap<string, number | undefined>, now: number): Promise<Released>;
}

/** Where each process's beat was last seen to move, on this replica's monotonic clock. */
export class BeatWatch {
  private readonly seen = new Map<string, { beat: number | undefined; at: number }>();
  private lastRead: number | undefined;

  /** Takes the beats read at `mono`. After a gap longer than `maxGapMs` since the last read
   * (this replica was itself stopped or cut off), every process is timed from now: what it did
   * meanwhile is unknown. */
  observe(beats: ReadonlyMap<string, number>, mono: number, maxGapMs: number): void {
    if (this.lastRead !== undefined && mono - this.lastRead > maxGapMs)
      for (const s of this.seen.values()) s.at = mono;
    this.lastRead = mono;
    for (const [origin, beat] of beats) {
      const s = this.seen.get(origin);
      if (s === undefined || s.beat !== beat) this.seen.set(origin, { beat, at: mono });
    }
    for (const [origin, s] of this.seen)
      if (!beats.has(origin) && s.beat !== undefined)
        this.seen.set(origin, { beat: undefined, at: mono });
  }

  /** Of `origins` (and every process with a beat), those whose beat has not moved for longer than
   * `thresholdMs` at `mono`, with the beat they were judged at (undefined: no row). One not
   * seen before is timed from now. Processes neither given nor with a beat are forgotten. */
  dead(
    origins: readonly string[],
    mono: number,
    thresholdMs: number,
  ): Map<string, number | undefined> {
    const asked = new Set(origins);
    for (const origin of asked)
      if (!this.seen.has(origin)) this.seen.set(origin, { beat: undefined, at: mono });
    const out = new Map<string, number | undefined>();
    for (const [origin, s] of this.seen) {
      if (s.beat === undefined && !asked.has(origin)) this.seen.delete(origin);
      else if (mono - s.at > thresholdMs) out.set(origin, s.beat);
    }
    return out;
  }
}

export interface DeadHolderOptions {
  beats: ReplicaBeats;
  leadership: Pick<Leadership, "leading">;
  /** This replica's name (--replica-id). */
  replica: string;
  clock: Clock;
  log: Logger;
  /** Time between beats (and the leader's passes). */
  intervalMs: number;
  /** A process whose beat has not moved for this long is dead (the nodes' offline threshold). */
  thresholdMs: number;
}

/** One beat, and the leader's pass: gives the nodes released. */
export async function beatAndRelease(o: DeadHolderOptions, watch: BeatWatch): Promise<Released> {
  const beats = await o.beats.beat(o.replica, o.clock.now());
  const mono = o.clock.monotonic();
  watch.observe(beats, mono, 2 * o.intervalMs + 1000);
  if (!o.leadership.leading()) return { nodes: [], offline: [] };
  const holders = (await o.beats.holderOrigins()).filter((h) => h !== o.beats.origin);
  const dead = watch.dead(holders, mono, o.thresholdMs);
  dead.delete(o.beats.origin);
  if (dead.size === 0) return { nodes: [], offline: [] };
  const released = await o.beats.releaseDead(dead, o.clock.now());
  if (released.nodes.length > 0)
    o.log.warn("released the nodes of hub replicas not seen alive; stored offline", {
      replicas: dead.size,
      nodes: released.nodes.length,
      offline: released.offline.slice(0, 20),
    });
  return released;
}

/** Beats every `intervalMs` until stopped; a failed beat or pass is logged and tried next time. */
export function startDeadHolders(o: DeadHolderOptions): { stop(): void } {
  const watch = new BeatWatch();
  let cancel: (() => void) | undefined;
  let stopped = false;
  const loop = async () => {
    try {
      await beatAndRelease(o, watch);
    } catch (error) {
      o.log.warn("replica beat or release of dead replicas' nodes failed; trying again", {
        error: String(error),
      });
    }
    if (!stopped) cancel = o.clock.setTimer(o.intervalMs, () => void loop());
  };
  void loop();
  return {
    stop: () => {
      stopped = true;
      cancel?.();
    },
  };
}
