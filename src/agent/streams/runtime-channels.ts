// The runtime's streaming server (containerd's, at the URL its Exec and PortForward answered) over
// WebSocket with the channel protocol v4.channel.k8s.io: each message is one channel byte and
// the channel's data. Reading pauses while what was read waits to be sent on (flow control).
import { connectWebSocket, type WsClient } from "../../util/ws-client.ts";

const RUNTIME_PROTOCOLS = ["v4.channel.k8s.io", "channel.k8s.io"];

export interface RuntimeChannels {
  /** Sends `data` on `channel`; resolves once the socket took it. */
  send(channel: number, data: Uint8Array): Promise<void>;
  /** Each message: its channel and data. A returned promise holds further reading until it
   * settles. */
  onData(fn: (channel: number, data: Uint8Array) => Promise<void> | void): void;
  onClose(fn: (code: number, reason: string) => void): void;
  close(): void;
}

/** Connects to a streaming server URL; rejects when it cannot. */
export async function openRuntimeChannels(url: string): Promise<RuntimeChannels> {
  const ws: WsClient = await connectWebSocket({ url, protocols: RUNTIME_PROTOCOLS });
  let pending = 0;
  const drained: (() => void)[] = [];
  ws.onDrain(() => {
    for (const d of drained.splice(0)) d();
  });
  const listen = (deliver: (channel: number, data: Uint8Array) => Promise<void> | void) =>
    ws.onMessage((d) => {
      if (d.length === 0) return;
      const r = deliver(d[0] as number, d.subarray(1));
      if (!(r instanceof Promise)) return;
      if (pending++ === 0) ws.pause();
      const settle = () => {
        if (--pending === 0) ws.resume();
      };
      r.then(settle, settle);
    });
  return {
    send(channel, data) {
      const msg = new Uint8Array(data.length + 1);
      msg[0] = channel;
      msg.set(data, 1);
      if (ws.send(msg)) return Promise.resolve();
      return new Promise((resolve) => drained.push(resolve));
    },
    onData: listen,
    onClose: (fn) => ws.onClose(fn),
    close: () => ws.close(1000, ""),
  };
}
