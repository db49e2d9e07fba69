// The WebSocket the hub client talks through, as a narrow interface so that tests use a fake one.
// dialWebSocket is the real one: Bun's WebSocket client, with the hub's CA for wss://.

/** Callbacks of one socket; each is called at most as the WebSocket API would. */
export interface SocketEvents {
  onOpen(): void;
  onMessage(data: string | ArrayBuffer | Uint8Array): void;
  /** Called once, when the socket closed or could not connect. */
  onClose(code: number, reason: string): void;
}

export interface HubSocket {
  /** Sends a text frame (a JSON message) or a binary frame (stream data). */
  send(data: string | Uint8Array): void;
  close(code?: number, reason?: string): void;
  /** Bytes queued in the socket and not yet written. */
  bufferedAmount(): number;
}

/** Opens a socket to `url` with the given request headers. */
export type Dial = (
  url: string,
  headers: Record<string, string>,
  events: SocketEvents,
) => HubSocket;

/** Dials with Bun's WebSocket; `ca` (PEM) is trusted for wss:// when given. */
export function dialWebSocket(ca?: string): Dial {
  return (url, headers, events) => {
    const options = { headers, ...(ca !== undefined && { tls: { ca } }) };
    const ws = new WebSocket(url, options as unknown as string[]);
    ws.binaryType = "arraybuffer";
    let closed = false;
    ws.onopen = () => events.onOpen();
    ws.onmessage = (e: MessageEvent) => events.onMessage(e.data as string | ArrayBuffer);
    ws.onclose = (e: CloseEvent) => {
      if (closed) return;
      closed = true;
      events.onClose(e.code, e.reason);
    };
    ws.onerror = () => {};
    return {
      send: (data) => ws.send(data),
      close: (code, reason) => {
        try {
          ws.close(code, reason);
        } catch {
          ws.terminate?.();
        }
      },
      bufferedAmount: () => ws.bufferedAmount,
    };
  };
}
