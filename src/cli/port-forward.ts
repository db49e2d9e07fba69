// `fleetlet port-forward POD [LOCAL:]REMOTE --hub URL`: listens on a local port, and carries each
// connection to the port in the pod through the hub, on a WebSocket of its own speaking the
// channel protocol the kubelet serves (v4.channel.k8s.io: data on channel 0, an error on 1, each
// channel's first message the port). Both directions wait for the slower side (backpressure).
import net from "node:net";
import { connectWebSocket, type WsClient } from "../util/ws-client.ts";
import { type FlagSpecs, parseArgs } from "./args.ts";
import { UsageError } from "./errors.ts";
import { type HubTarget, hubTarget } from "./hub-client.ts";
import type { CliIO } from "./io.ts";

export const PORT_FORWARD_USAGE = `usage: fleetlet port-forward POD [LOCAL:]REMOTE [-n NS] [--address 127.0.0.1] --hub URL [--token T]
  Forwards connections to LOCAL on this machine (REMOTE when not given; 0: any free port) to
  port REMOTE of the pod, through the hub and the pod's device, until Ctrl-C.
`;

const flags = {
  namespace: { type: "string", short: "n" },
  address: { type: "string" },
  hub: { type: "string" },
  token: { type: "string" },
  "ca-file": { type: "string" },
  help: { type: "boolean", short: "h" },
} as const satisfies FlagSpecs;

function parsePorts(spec: string): { local: number; remote: number } {
  const m = /^(?:(\d+):)?(\d+)$/.exec(spec);
  const remote = Number(m?.[2]);
  const local = m?.[1] === undefined ? remote : Number(m[1]);
  if (m === null || remote < 1 || remote > 65535 || local > 65535)
    throw new UsageError(`invalid port ${JSON.stringify(spec)}: want [LOCAL:]REMOTE`);
  return { local, remote };
}

/** Carries one local connection to the pod's port. */
async function forward(
  socket: net.Socket,
  url: string,
  target: HubTarget,
  io: CliIO,
  remote: number,
): Promise<void> {
  socket.pause();
  let ws: WsClient;
  try {
    ws = await connectWebSocket({
      url,
      protocols: ["v4.channel.k8s.io"],
      headers: { authorization: `Bearer ${target.token}` },
      ...(target.ca !== undefined && { ca: target.ca }),
    });
  } catch (err) {
    io.stderr(`error forwarding port ${remote}: ${(err as Error).message}\n`);
    socket.destroy();
    return;
  }
  const prefixed = new Set<number>();
  ws.onMessage((d) => {
    const ch = d[0] as number;
    let data = d.subarray(1);
    if (!prefixed.has(ch)) {
      prefixed.add(ch);
      data = data.subarray(2);
    }
    if (data.length === 0) return;
    if (ch === 0) {
      if (!socket.write(data)) ws.pause();
    } else io.stderr(`error forwarding port ${remote}: ${Buffer.from(data).toString().trim()}\n`);
  });
  socket.on("drain", () => ws.resume());
  ws.onClose(() => socket.end());
  ws.onDrain(() => socket.resume());
  socket.on("data", (chunk: Buffer) => {
    const m = new Uint8Array(chunk.length + 1);
    m.set(chunk, 1);
    if (!ws.send(m)) socket.pause();
  });
  socket.on("close", () => ws.close());
  socket.on("error", () => ws.close());
  socket.resume();
}

export async function portForwardCommand(argv: string[], io: CliIO): Promise<number> {
  const { flags: f, positionals } = parseArgs(argv, flags);
  if (f.help) {
    io.stdout(PORT_FORWARD_USAGE);
    return 0;
  }
  const [pod, spec, ...extra] = positionals;
  if (pod === undefined || spec === undefined || extra.length > 0)
    throw new UsageError(`port-forward takes a pod and one port\n${PORT_FORWARD_USAGE}`);
  const name = pod.replace(/^(pods?|po)\//, "");
  const { local, remote } = parsePorts(spec);
  const target = hubTarget(f, io);
  const ns = encodeURIComponent(f.namespace ?? "default");
  const url = `${target.url.replace(/^http/, "ws")}/api/v1/namespaces/${ns}/pods/${encodeURIComponent(name)}/portforward?ports=${remote}`;
  const address = f.address ?? "127.0.0.1";
  const server = net.createServer((socket) => {
    io.stdout(`Handling connection for ${remote}\n`);
    void forward(socket, url, target, io, remote);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(local, address, () => resolve());
  });
  const port = (server.address() as net.AddressInfo).port;
  io.stdout(`Forwarding from ${address}:${port} -> ${remote}\n`);
  await new Promise<void>((resolve) => {
    process.once("SIGINT", () => resolve());
    process.once("SIGTERM", () => resolve());
    io.signal?.addEventListener("abort", () => resolve(), { once: true });
  });
  server.close();
  return 0;
}
