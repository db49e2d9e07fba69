// Cutting a byte stream from a peer into whole D-Bus messages. A message's length is known from
// its first 16 bytes, and one longer than the limit is refused then, so the framer never holds
// more than one message's worth of bytes (at most the limit) plus one chunk.
import {
  DEFAULT_MAX_MESSAGE_BYTES,
  decodeMessage,
  type Message,
  messageLength,
} from "./message.ts";

export class MessageFramer {
  /** Bytes received and not yet part of a whole message. */
  private pending: Uint8Array = new Uint8Array(0);

  constructor(private readonly maxBytes = DEFAULT_MAX_MESSAGE_BYTES) {}

  /** The whole messages that `chunk` completes, in order (messages of unknown types left out);
   * throws DBusDecodeError at the first invalid one, after which the stream cannot be read. */
  push(chunk: Uint8Array): Message[] {
    this.pending = this.pending.length === 0 ? chunk : concat(this.pending, chunk);
    const out: Message[] = [];
    let at = 0;
    while (this.pending.length - at >= 16) {
      const total = messageLength(this.pending.subarray(at, at + 16), this.maxBytes);
      if (this.pending.length - at < total) break;
      const m = decodeMessage(this.pending.subarray(at, at + total), this.maxBytes);
      if (m !== null) out.push(m);
      at += total;
    }
    this.pending = this.pending.slice(at);
    return out;
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const c = new Uint8Array(a.length + b.length);
  c.set(a);
  c.set(b, a.length);
  return c;
}
