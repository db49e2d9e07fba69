// The outbox: every sequenced message for the hub (node, pod.*, event) waits here, on disk, until
// the hub acknowledges it. Invariants:
// - seqs increase by one per push and survive restarts (with the streamId, in the file); only a
//   new stream (a new streamId) starts them at 1 again;
// - state coalesces: one entry for the node, one per pod uid (newest wins), one per event name
//   (a repeat of an event replaces its older count); so entries are bounded by pods + maxEvents;
// - at most `maxEvents` events are kept: the oldest are dropped and counted (`takeDropped`);
// - the file is append-only JSON lines, rewritten (atomically) when it grows past twice its
//   live size, so disk use is bounded too; a torn last line (crash while writing) is skipped;
// - a write that fails (a full disk) keeps the entry in memory, and from then on the file is only
//   ever rewritten whole (never appended to after a possibly torn line), at most once per
//   `retryMs` at a write, and by a timer `retryMs` after each failure (so a quiet agent's file is
//   rewritten too), until a rewrite works: then the file holds everything again.
import { randomBytes } from "node:crypto";
import { appendFileSync, mkdirSync, readFileSync } from "node:fs";
import { dirname } from "node:path";
import type { SequencedMessage } from "../../protocol/index.ts";
import { writeFileAtomic } from "../../util/atomic-file.ts";
import type { Logger } from "../../util/log.ts";
import { ignoreStateWrites, type StateWrites } from "../events/state-writes.ts";

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
  /** Where failed writes of the file are said (default: nowhere but the log). */
  stateWrites?: StateWrites;
  /** The file calls (injected in tests to fail like a full disk). */
  files?: OutboxFiles;
  /** Milliseconds now, for spacing rewrites after a failure (default Date.now). */
  now?: () => number;
  /** A failed write is retried (as a whole rewrite) at most this often; 1 s by default. */
  retryMs?: number;
  /** Arms a timer (the agent's clock), for the rewrite `retryMs` after a failure; without it,
   * only a later write retries. Returns its cancel. */
  setTimer?: (ms: number, fn: () => void) => () => void;
}

/** How the outbox writes its file. */
export interface OutboxFiles {
  /** Appends `text`; throws when it cannot (a part may be written). */
  append(path: string, text: string): void;
  /** Replaces the file with `text` atomically; throws when it cannot (the old file stays). */
  replace(path: string, text: string): void;
}

const realFiles: OutboxFiles = {
  append: (path, text) => appendFileSync(path, text, { mode: 0o600 }),
  replace: (path, text) => writeFileAtomic(path, text),
};

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
  /** Starts a new stream, for an outbox whose history differs from the hub's: a new streamId,
   * seqs from 1 again, nothing reported; the events waiting are kept (renumbered, in order), the
   * node and pod entries dropped (the hub forgets the node's pods on a new stream, and the next
   * welcome sends the node and every pod again). */
  newStream(): void;
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

/** A stream's name: random, so that the hub never takes a new stream for an old one. */
function newStreamId(): string {
  return randomBytes(12).toString("base64url");
}

export function openOutbox(opts: OutboxOptions): Outbox {
  return new FileOutbox(opts);
}

class FileOutbox implements Outbox {
  private readonly maxEvents: number;
  private readonly log: Logger;
  private readonly path: string;
  /** The entries waiting, by key (keyOf), in seq order: a replaced entry moves to the end. */
  private readonly live = new Map<string, SequencedMessage>();
  /** Pod uid → fingerprint of the last pod.upsert pushed. */
  private readonly reportedPods = new Map<string, string>();
  private currentStreamId = "";
  private highestSeq = 0;
  private highestAcked = 0;
  private droppedEvents = 0;
  /** Events among the live entries. */
  private events = 0;
  /** Bytes appended to the file since it was last rewritten. */
  private appendedBytes = 0;
  /** The size of the file as last rewritten (only live entries). */
  private liveBytes = 0;
  /** The file lacks something in memory (a write failed): rewrite it whole, never append. */
  private unsaved = false;
  /** When a rewrite was last tried while `unsaved`. */
  private triedAt = Number.NEGATIVE_INFINITY;
  /** Whether the timer of a rewrite after a failure is armed. */
  private retryArmed = false;
  private readonly setTimer: OutboxOptions["setTimer"];
  private readonly files: OutboxFiles;
  private readonly stateWrites: StateWrites;
  private readonly now: () => number;
  private readonly retryMs: number;

  constructor(opts: OutboxOptions) {
    const maxEvents = opts.maxEvents ?? 1000;
    if (!Number.isInteger(maxEvents) || maxEvents < 1) {
      throw new Error(`outbox maxEvents must be a positive integer, got ${maxEvents}`);
    }
    this.maxEvents = maxEvents;
    this.log = opts.logger;
    this.path = opts.path;
    this.files = opts.files ?? realFiles;
    this.stateWrites = opts.stateWrites ?? ignoreStateWrites;
    this.now = opts.now ?? Date.now;
    this.retryMs = opts.retryMs ?? 1000;
    this.setTimer = opts.setTimer;
    mkdirSync(dirname(opts.path), { recursive: true, mode: 0o700 });
    this.load();
    if (this.currentStreamId === "") this.currentStreamId = newStreamId();
    this.compact();
  }

  get streamId(): string {
    return this.currentStreamId;
  }
  get ackedSeq(): number {
    return this.highestAcked;
  }
  get lastSeq(): number {
    return this.highestSeq;
  }
  get eventCount(): number {
    return this.events;
  }
  get size(): number {
    return this.live.size;
  }
  get dropped(): number {
    return this.droppedEvents;
  }

  push(input: OutboxInput): SequencedMessage {
    const m = { ...input, seq: this.highestSeq + 1 } as SequencedMessage;
    const fp = m.type === "pod.upsert" ? fingerprint(m.pod) : undefined;
    const before = this.droppedEvents;
    this.store(m, fp);
    this.write({ t: "m", m, ...(fp !== undefined && { fp }) });
    if (this.droppedEvents > before) {
      this.log.debug("hub outbox full: dropped oldest events", { dropped: this.droppedEvents });
    }
    return m;
  }

  ack(seq: number): void {
    if (seq <= this.highestAcked) return;
    this.forget(seq);
    this.write({ t: "a", seq });
  }

  nextAfter(seq: number): SequencedMessage | undefined {
    for (const m of this.live.values()) if (m.seq > seq) return m;
    return undefined;
  }

  entries(): SequencedMessage[] {
    return [...this.live.values()];
  }

  takeDropped(): number {
    const n = this.droppedEvents;
    if (n > 0) {
      this.droppedEvents = 0;
      this.write({ t: "d" });
    }
    return n;
  }

  newStream(): void {
    const events = [...this.live.values()].filter((m) => m.type === "event");
    this.live.clear();
    this.events = 0;
    this.reportedPods.clear();
    this.currentStreamId = newStreamId();
    this.highestSeq = 0;
    this.highestAcked = 0;
    for (const m of events) this.store({ ...m, seq: this.highestSeq + 1 }, undefined);
    this.compact();
  }

  reported(): ReadonlyMap<string, string> {
    return this.reportedPods;
  }

  forgetReported(): void {
    this.reportedPods.clear();
    this.write({ t: "f" });
  }

  compact(): void {
    const header: Line = {
      t: "h",
      streamId: this.currentStreamId,
      lastSeq: this.highestSeq,
      ackedSeq: this.highestAcked,
      dropped: this.droppedEvents,
      reported: Object.fromEntries(this.reportedPods),
    };
    const lines = [header, ...[...this.live.values()].map((m): Line => ({ t: "m", m }))];
    const text = lines.map((l) => `${JSON.stringify(l)}\n`).join("");
    this.triedAt = this.now();
    try {
      this.files.replace(this.path, text);
    } catch (err) {
      this.failed("cannot rewrite the hub outbox; kept in memory", err);
      return;
    }
    this.unsaved = false;
    this.stateWrites.succeeded(this.path);
    this.liveBytes = text.length;
    this.appendedBytes = 0;
  }

  /** A write failed: the file lacks what memory holds until a rewrite works. */
  private failed(what: string, err: unknown): void {
    if (!this.unsaved) this.log.warn(what, { file: this.path, error: err });
    this.unsaved = true;
    this.stateWrites.failed(this.path, err);
    this.retryLater();
  }

  /** Arms the timer that rewrites the file `retryMs` from now, if it is not armed. */
  private retryLater(): void {
    if (this.setTimer === undefined || this.retryArmed) return;
    this.retryArmed = true;
    this.setTimer(this.retryMs, () => {
      this.retryArmed = false;
      if (this.unsaved) this.compact();
    });
  }

  /** Replays the file; a line that does not parse is skipped and counted. */
  private load(): void {
    let text = "";
    try {
      text = readFileSync(this.path, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") {
        this.log.warn("cannot read the hub outbox; starting a new stream", {
          file: this.path,
          error: err,
        });
      }
      return;
    }
    let bad = 0;
    for (const raw of text.split("\n")) {
      if (raw === "") continue;
      try {
        this.apply(JSON.parse(raw) as Line);
      } catch {
        bad++;
      }
    }
    if (bad > 0) {
      this.log.warn("skipped unreadable lines of the hub outbox", { file: this.path, lines: bad });
    }
  }

  private apply(line: Line): void {
    switch (line.t) {
      case "h":
        this.currentStreamId = line.streamId;
        this.highestSeq = line.lastSeq;
        this.highestAcked = line.ackedSeq;
        this.droppedEvents = line.dropped;
        this.reportedPods.clear();
        for (const [k, v] of Object.entries(line.reported)) this.reportedPods.set(k, v);
        return;
      case "m":
        this.store(line.m, line.fp);
        return;
      case "a":
        this.forget(line.seq);
        return;
      case "d":
        this.droppedEvents = 0;
        return;
      case "f":
        this.reportedPods.clear();
        return;
    }
  }

  private store(m: SequencedMessage, fp: string | undefined): void {
    const key = keyOf(m);
    const old = this.live.get(key);
    if (old !== undefined) {
      this.live.delete(key);
      if (old.type === "event") this.events--;
    }
    this.live.set(key, m);
    this.highestSeq = Math.max(this.highestSeq, m.seq);
    if (m.type === "event") this.events++;
    if (m.type === "pod.upsert" && fp !== undefined) this.reportedPods.set(m.uid, fp);
    if (m.type === "pod.delete") this.reportedPods.delete(m.uid);
    while (this.events > this.maxEvents) this.dropOldestEvent();
  }

  private dropOldestEvent(): void {
    for (const [key, m] of this.live) {
      if (m.type !== "event") continue;
      this.live.delete(key);
      this.events--;
      this.droppedEvents++;
      return;
    }
  }

  private forget(seq: number): void {
    this.highestAcked = Math.max(this.highestAcked, seq);
    for (const [key, m] of this.live) {
      if (m.seq > seq) break;
      this.live.delete(key);
      if (m.type === "event") this.events--;
    }
  }

  /** Appends a line; rewrites the file when appends pass twice its live size (64 KiB at least),
   * or, after a failure, in place of the append (at most once per retryMs). */
  private write(line: Line): void {
    if (this.unsaved) {
      if (this.now() - this.triedAt >= this.retryMs) this.compact();
      return;
    }
    const text = `${JSON.stringify(line)}\n`;
    try {
      this.files.append(this.path, text);
    } catch (err) {
      this.failed("cannot append to the hub outbox; kept in memory", err);
      return;
    }
    this.appendedBytes += text.length;
    if (this.appendedBytes > Math.max(64 * 1024, 2 * this.liveBytes)) this.compact();
  }
}
