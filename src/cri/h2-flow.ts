// Our side of HTTP/2 flow control (RFC 9113 5.2): what the peer may still send on the
// connection or on one stream before our next WINDOW_UPDATE, and the bytes we owe back. We give
// back as data arrives (its reader takes it at once), half a window at a time; a peer that sends
// past what we gave breaks the rules. And each stream's state of both directions.

import { H2_FLOW_CONTROL_ERROR, H2Error } from "./h2-frame.ts";

export class ReceiveWindow {
  /** What the peer may still send before our next WINDOW_UPDATE. */
  private left: number;
  /** Bytes received and not yet given back. */
  private unacked = 0;

  /** `size`: the window we announced; `initial`: what the peer may send at first (the
   * connection starts at HTTP/2's 65,535 and is raised by a WINDOW_UPDATE). */
  constructor(
    private readonly size: number,
    initial = size,
  ) {
    this.left = initial;
  }

  /** Counts `n` bytes received on `what` ("the connection", "stream 3"); throws
   * FLOW_CONTROL_ERROR past the window. Returns the WINDOW_UPDATE increment now due (0: none;
   * never while `giveBack` is false, as for a stream that has ended). */
  take(n: number, what: string, giveBack = true): number {
    this.left -= n;
    if (this.left < 0) {
      throw new H2Error(H2_FLOW_CONTROL_ERROR, `DATA past ${what}'s flow-control window`);
    }
    this.unacked += n;
    if (!giveBack || this.unacked < this.size / 2) return 0;
    const increment = this.unacked;
    this.left += increment;
    this.unacked = 0;
    return increment;
  }
}

/** Our sending side of one stream. */
export interface SendState {
  /** Data not yet sent (waiting for flow-control window). */
  pending: Buffer[];
  /** How our side ends once `pending` is sent: END_STREAM on the last DATA frame (true), a
   * trailers block, or not yet (undefined). */
  endWith: true | Buffer | undefined;
  /** Our side has ended (END_STREAM sent). */
  ended: boolean;
  /** What the peer lets us send on this stream. */
  sendWindow: number;
  /** What the peer may send us on this stream. */
  recv: ReceiveWindow;
}

export function newSendState(sendWindow: number, recvWindow: number): SendState {
  const recv = new ReceiveWindow(recvWindow);
  return { pending: [], endWith: undefined, ended: false, sendWindow, recv };
}
