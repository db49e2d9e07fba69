// Frames on their way to the socket: everything queued in one turn of the event loop goes out in
// one write, and what the socket does not take waits for it to drain. Replies the peer asked for
// (acknowledgements, resets, window updates) are counted while they wait, so that a peer that
// asks and never reads can be cut off before it grows this queue without end.

import type { Socket } from "bun";

/** Replies (acknowledgements, resets, window updates) queued for a peer that does not read
 * them before the connection is closed with ENHANCE_YOUR_CALM (Go's HTTP/2 has 10,000 too). */
export const MAX_QUEUED_REPLIES = 10_000;
/** Bytes of frames of any kind waiting for the peer to read them, by default, before the
 * connection is closed: answers that need no flow-control window (headers, trailers-only
 * answers) would otherwise pile up for a peer that asks and never reads. */
const MAX_QUEUED_BYTES = 16 << 20;

export class FrameOutbox {
  /** Frames not yet written (before the socket opened, or while it is full). */
  private frames: Buffer[] = [];
  /** Replies queued since the outbox was last empty. */
  private replies = 0;
  /** Bytes in `frames`. */
  private bytes = 0;
  private scheduled = false;

  /** `socket()`: where to write, once there is one; `maxBytes`: the most it holds unwritten. */
  constructor(
    private readonly socket: () => Socket<unknown> | undefined,
    readonly maxBytes = MAX_QUEUED_BYTES,
  ) {}

  /** Queues a frame, written at the end of this turn of the event loop; false (and nothing
   * queued) when it would hold more than `maxBytes` unwritten. */
  push(buf: Buffer): boolean {
    if (this.full(buf)) return false;
    this.frames.push(buf);
    this.bytes += buf.length;
    if (this.scheduled) return true;
    this.scheduled = true;
    queueMicrotask(() => {
      this.scheduled = false;
      this.flush();
    });
    return true;
  }

  /** Whether `buf` would take it past `maxBytes`. */
  full(buf: Buffer): boolean {
    return this.bytes + buf.length > this.maxBytes;
  }

  /** Queues a reply; false (and nothing queued) once MAX_QUEUED_REPLIES wait unread. */
  pushReply(buf: Buffer): boolean {
    if (++this.replies > MAX_QUEUED_REPLIES) return false;
    return this.push(buf);
  }

  /** Writes what the socket takes now. */
  flush(): void {
    const s = this.socket();
    if (s === undefined || this.frames.length === 0) return;
    const data = this.frames.length === 1 ? (this.frames[0] as Buffer) : Buffer.concat(this.frames);
    const written = s.write(data);
    this.frames = written < data.length ? [data.subarray(Math.max(0, written))] : [];
    this.bytes = (this.frames[0] as Buffer | undefined)?.length ?? 0;
    if (this.frames.length === 0) this.replies = 0;
  }

  /** Drops everything queued and writes `buf` alone, now (a GOAWAY before closing). */
  sendAlone(buf: Buffer): void {
    this.frames = [buf];
    this.bytes = buf.length;
    this.flush();
  }

  clear(): void {
    this.frames = [];
    this.bytes = 0;
  }
}
