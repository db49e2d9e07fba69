// The outbox: every sequenced message for the hub (node, pod.*, event) waits here, on disk, until
// the hub acknowledges it. Invariants:
// - seqs increase by one per push and survive restarts (with the streamId, in the file);
// - state coalesces: one entry for the node, one per pod uid (newest wins), one per event name
//   (a repeat of an event replaces its older count); so entries are bounded by pods + maxEvents;
// - at most `maxEvents` events are kept: the oldest are dropped and counted (`takeDropped`);
// - the file is append-only JSON lines, rewritten (atomically) when it grows past twice its
//   live size, so disk use is bounded too; a torn last line (crash while writing) is skipped.
import { randomBytes } from "node:crypto";
import { appendFileSync, mkdirSync, readFileSync } from "node:fs";
import { dirname } from "node:path";
import type { SequencedMessage } from "../../protocol/index.ts";
import { writeFileAtomic } from "../../util/atomic-file.ts";
import type { Logger } from "../../util/log.ts";

/** A message without its seq, as pushed; the outbox assigns the seq. */
export type OutboxInput = SequencedMessage extends infer M
  ? M extends SequencedMessage
    ? Omit<M, "seq">
    : never
  : never;

export interface OutboxOptions {
  /** The file, e.g. <rootDir>/hub/outbox. */
  path: string;
  /** Events kept at most (oldest dropped first); 1000 by default. */
  maxEvents?: number;
  logger: Logger;
}

export interface Outbox {
  /** Names this outbox towards the hub; kept across restarts, new when the file is lost. */
  readonly streamId: string;
  /** The highest seq the hub acknowledged. */
  readonly ackedSeq: number;
  /** The highest seq assigned (0 before the first push). */
  readonly lastSeq: number;
  /** Events waiting (for tests and metrics). */
  readonly eventCount: number;
  /** Entries waiting, all kinds. */
  readonly size: number;
  /** Stores `m` with the next seq, replacing an older entry for the same node/pod/event. */
  push(m: OutboxInput): SequencedMessage;
  /** Forgets every entry with seq ≤ `seq` (the hub stored them). */
  ack(seq: number): void;
  /** The first entry with a seq above `seq`, in seq order. */
  nextAfter(seq: number): SequencedMessage | undefined;
  /** Entries, in seq order (copies are not made: do not modify). */
  entries(): SequencedMessage[];
  /** Events dropped since the last call, and resets the count (persisted). */
  takeDropped(): number;
  /** Events dropped and not yet taken. */
  readonly dropped: number;
  /** Pod uid → fingerprint of the last pod.upsert pushed (absent after a pod.delete). */
  reported(): ReadonlyMap<string, string>;
  /** Moves the seq (and the acknowledged seq) up to `seq`: the next push gets seq + 1. For an
   * outbox that lost records the hub had stored; lower seqs are ignored. */
  skipTo(seq: number): void;
  /** Forgets what was reported, when the hub has lost it. */
  forgetReported(): void;
  /** Rewrites the file with only the live entries. */
  compact(): void;
}

type Line =
  | {
      t: "h";
      streamId: string;
      lastSeq: number;
      ackedSeq: number;
      dropped: number;
      reported: Record<string, string>;
    }
  | { t: "m"; m: SequencedMessage; fp?: string }
  | { t: "a"; seq: number }
  | { t: "d" }
  | { t: "f" };

function keyOf(m: OutboxInput | SequencedMessage): string {
  switch (m.type) {
    case "node":
    case "node.patch":
      return "node";
    case "pod.upsert":
    case "pod.delete":
      return `pod/${m.uid}`;
    case "event":
      return `event/${m.event.metadata.name}`;
  }
}

/** A short fingerprint of a pod as reported, to tell whether it changed since. */
export function fingerprint(value: unknown): string {
  return Bun.hash(JSON.stringify(value)).toString(36);
}

export function openOutbox(opts: OutboxOptions): Outbox {
  const maxEvents = opts.maxEvents ?? 1000;
  if (!Number.isInteger(maxEvents) || maxEvents < 1) {
    throw new Error(`outbox maxEvents must be a positive integer, got ${maxEvents}`);
  }
  const log = opts.logger;
  mkdirSync(dirname(opts.path), { recursive: true, mode: 0o700 });
  const live = new Map<string, SequencedMessage>();
  const reported = new Map<string, string>();
  let streamId = "";
  let lastSeq = 0;
  let ackedSeq = 0;
  let dropped = 0;
  let events = 0;
  let appendedBytes = 0;

  const apply = (line: Line): void => {
    switch (line.t) {
      case "h":
        streamId = line.streamId;
        lastSeq = line.lastSeq;
        ackedSeq = line.ackedSeq;
        dropped = line.dropped;
        reported.clear();
        for (const [k, v] of Object.entries(line.reported)) reported.set(k, v);
        return;
      case "m":
        store(line.m, line.fp);
        return;
      case "a":
        forget(line.seq);
        return;
      case "d":
        dropped = 0;
        return;
      case "f":
        reported.clear();
        return;
    }
  };

  function store(m: SequencedMessage, fp: string | undefined): void {
    const key = keyOf(m);
    const old = live.get(key);
    if (old !== undefined) {
      live.delete(key);
      if (old.type === "event") events--;
    }
    live.set(key, m);
    lastSeq = Math.max(lastSeq, m.seq);
    if (m.type === "event") events++;
    if (m.type === "pod.upsert" && fp !== undefined) reported.set(m.uid, fp);
    if (m.type === "pod.delete") reported.delete(m.uid);
    while (events > maxEvents) dropOldestEvent();
  }

  function dropOldestEvent(): void {
    for (const [key, m] of live) {
      if (m.type !== "event") continue;
      live.delete(key);
      events--;
      dropped++;
      return;
    }
  }

  function forget(seq: number): void {
    ackedSeq = Math.max(ackedSeq, seq);
    for (const [key, m] of live) {
      if (m.seq > seq) break;
      live.delete(key);
      if (m.type === "event") events--;
    }
  }

  const write = (line: Line): void => {
    const text = `${JSON.stringify(line)}\n`;
    try {
      appendFileSync(opts.path, text, { mode: 0o600 });
    } catch (err) {
      log.warn("cannot append to the hub outbox; kept in memory", { file: opts.path, error: err });
    }
    appendedBytes += text.length;
    if (appendedBytes > Math.max(64 * 1024, 2 * liveBytes())) compact();
  };

  let liveBytesCache = 0;
  const liveBytes = () => liveBytesCache;

  function compact(): void {
    const header: Line = {
      t: "h",
      streamId,
      lastSeq,
      ackedSeq,
      dropped,
      reported: Object.fromEntries(reported),
    };
    const lines = [header, ...[...live.values()].map((m): Line => ({ t: "m", m }))];
    const text = lines.map((l) => `${JSON.stringify(l)}\n`).join("");
    try {
      writeFileAtomic(opts.path, text);
    } catch (err) {
      log.warn("cannot rewrite the hub outbox", { file: opts.path, error: err });
    }
    liveBytesCache = text.length;
    appendedBytes = 0;
  }

  load();
  if (streamId === "") streamId = randomBytes(12).toString("base64url");
  compact();

  function load(): void {
    let text = "";
    try {
      text = readFileSync(opts.path, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") {
        log.warn("cannot read the hub outbox; starting a new stream", {
          file: opts.path,
          error: err,
        });
      }
      return;
    }
    let bad = 0;
    for (const raw of text.split("\n")) {
      if (raw === "") continue;
      try {
        apply(JSON.parse(raw) as Line);
      } catch {
        bad++;
      }
    }
    if (bad > 0)
      log.warn("skipped unreadable lines of the hub outbox", { file: opts.path, lines: bad });
  }

  return {
    get streamId() {
      return streamId;
    },
    get ackedSeq() {
      return ackedSeq;
    },
    get lastSeq() {
      return lastSeq;
    },
    get eventCount() {
      return events;
    },
    get size() {
      return live.size;
    },
    get dropped() {
      return dropped;
    },
    push(input) {
      const m = { ...input, seq: lastSeq + 1 } as SequencedMessage;
      const fp = m.type === "pod.upsert" ? fingerprint(m.pod) : undefined;
      const before = dropped;
      store(m, fp);
      write({ t: "m", m, ...(fp !== undefined && { fp }) });
      if (dropped > before) log.debug("hub outbox full: dropped oldest events", { dropped });
      return m;
    },
    ack(seq) {
      if (seq <= ackedSeq) return;
      forget(seq);
      write({ t: "a", seq });
    },
    nextAfter(seq) {
      for (const m of live.values()) if (m.seq > seq) return m;
      return undefined;
    },
    entries: () => [...live.values()],
    takeDropped() {
      const n = dropped;
      if (n > 0) {
        dropped = 0;
        write({ t: "d" });
      }
      return n;
    },
    skipTo(seq) {
      if (seq <= lastSeq) return;
      forget(seq);
      lastSeq = seq;
      compact();
    },
    reported: () => reported,
    forgetReported() {
      reported.clear();
      write({ t: "f" });
    },
    compact,
  };
}
