// An interactive exec or attach from the command line (`fleetlet exec -it`, `fleetlet attach`):
// a WebSocket speaking the remote-command channel protocol v5.channel.k8s.io to the hub (--hub) or
// to the agent's local API (its unix socket); the same client either way. With -t and a terminal
// on stdin, the terminal is put in raw mode and its size is sent at start and on every resize.
// The end of stdin is sent as v5's CLOSE; an exec's exit code becomes ours.
import { RC, readStatus } from "../protocol/remotecommand.ts";
import { connectWebSocket, type WsClient, WsHandshakeError } from "../util/ws-client.ts";
import { resolveSocketPath } from "./client.ts";
import { CliError } from "./errors.ts";
import { hubTarget } from "./hub-client.ts";
import type { CliIO } from "./io.ts";

interface RemoteExecTarget {
  /** ws(s):// URL of the exec or attach endpoint with its query. */
  url: string;
  /** What runs there, for messages: "exec" (the default) or "attach". */
  kind?: "exec" | "attach";
  unixPath?: string;
  headers?: Record<string, string>;
  ca?: string;
}

interface RemoteExecIO {
  stdin: NodeJS.ReadStream | null;
  stdout: { write(b: Uint8Array): unknown };
  stderr: { write(b: Uint8Array | string): unknown };
  tty: boolean;
  /** The terminal's size now, when there is one. */
  size?: () => { columns: number; rows: number } | undefined;
  /** Calls `fn` when the terminal is resized; returns the stop. */
  onResize?: (fn: () => void) => () => void;
}

/** The exec path and query for a pod, as kubectl sends it. */
export function execPath(
  ns: string,
  pod: string,
  o: { container?: string; command: string[]; stdin: boolean; tty: boolean },
): string {
  const q = new URLSearchParams();
  for (const c of o.command) q.append("command", c);
  if (o.container !== undefined) q.set("container", o.container);
  q.set("stdin", String(o.stdin));
  q.set("stdout", "true");
  q.set("stderr", String(!o.tty));
  q.set("tty", String(o.tty));
  return `/api/v1/namespaces/${encodeURIComponent(ns)}/pods/${encodeURIComponent(pod)}/exec?${q}`;
}

function refusal(err: unknown, where: string): CliError {
  if (err instanceof WsHandshakeError) {
    try {
      const s = JSON.parse(err.body) as { message?: string; reason?: string };
      if (typeof s.message === "string")
        return new CliError(`Error from server (${s.reason ?? err.status}): ${s.message}`);
    } catch {
      // not a Status: shown as it is below
    }
    return new CliError(`${where} answered HTTP ${err.status}: ${err.body.trim()}`);
  }
  return new CliError((err as Error).message);
}

function sendSize(ws: WsClient, io: RemoteExecIO): void {
  const size = io.size?.();
  if (size === undefined) return;
  ws.send(
    Uint8Array.of(
      RC.resize,
      ...Buffer.from(JSON.stringify({ Width: size.columns, Height: size.rows })),
    ),
  );
}

/** Runs the exec or attach; resolves to the command's exit code (an attach's: 0). */
async function remoteExec(
  target: RemoteExecTarget,
  io: RemoteExecIO,
  where: string,
): Promise<number> {
  let ws: WsClient;
  try {
    ws = await connectWebSocket({
      url: target.url,
      protocols: ["v5.channel.k8s.io"],
      ...(target.unixPath !== undefined && { unixPath: target.unixPath }),
      ...(target.headers !== undefined && { headers: target.headers }),
      ...(target.ca !== undefined && { ca: target.ca }),
    });
  } catch (err) {
    throw refusal(err, where);
  }
  const raw = io.tty && io.stdin?.isTTY === true;
  if (raw) io.stdin?.setRawMode?.(true);
  const stopResize = io.tty ? io.onResize?.(() => sendSize(ws, io)) : undefined;
  if (io.tty) sendSize(ws, io);
  let result: { exitCode: number } | { error: string } | undefined;
  const done = new Promise<void>((resolve) => {
    ws.onMessage((d) => {
      const ch = d[0];
      const data = d.subarray(1);
      if (ch === RC.stdout) io.stdout.write(data);
      else if (ch === RC.stderr) io.stderr.write(data);
      else if (ch === RC.error) result = readStatus(data);
    });
    ws.onClose(() => resolve());
  });
  const stdin = io.stdin;
  if (stdin !== null) {
    stdin.on("data", (chunk: Buffer) => {
      const m = new Uint8Array(chunk.length + 1);
      m[0] = RC.stdin;
      m.set(chunk, 1);
      if (!ws.send(m)) stdin.pause();
    });
    ws.onDrain(() => stdin.resume());
    stdin.on("end", () => ws.send(Uint8Array.of(RC.close, RC.stdin)));
  }
  await done;
  stopResize?.();
  if (raw) io.stdin?.setRawMode?.(false);
  stdin?.pause();
  stdin?.destroy?.();
  if (result === undefined)
    throw new CliError(`the ${target.kind ?? "exec"} at ${where} ended without an exit status`);
  if ("error" in result) throw new CliError(`Error from server: ${result.error}`);
  if (result.exitCode !== 0)
    io.stderr.write(`command terminated with exit code ${result.exitCode}\n`);
  return result.exitCode;
}

/** Where an interactive exec or attach goes: the hub (--hub) or this device's agent. */
export interface RemoteFlags {
  socket?: string | undefined;
  hub?: string | undefined;
  token?: string | undefined;
  "ca-file"?: string | undefined;
}

/** Runs the exec or attach at `path` (with its query) through the hub or the agent's socket,
 * with this process's stdin (when `stdin`), stdout, stderr and terminal. */
export function runRemote(
  flags: RemoteFlags,
  io: CliIO,
  path: string,
  o: { kind: "exec" | "attach"; stdin: boolean; tty: boolean },
): Promise<number> {
  const local = flags.hub === undefined;
  const socket = resolveSocketPath(flags.socket, io.env);
  const target = local ? undefined : hubTarget(flags, io);
  return remoteExec(
    target === undefined
      ? { url: `ws://localhost${path}`, unixPath: socket, kind: o.kind }
      : {
          url: `${target.url.replace(/^http/, "ws")}${path}`,
          kind: o.kind,
          headers: { authorization: `Bearer ${target.token}` },
          ...(target.ca !== undefined && { ca: target.ca }),
        },
    {
      stdin: o.stdin ? process.stdin : null,
      stdout: process.stdout,
      stderr: process.stderr,
      tty: o.tty,
      size: () =>
        process.stdout.isTTY
          ? { columns: process.stdout.columns, rows: process.stdout.rows }
          : undefined,
      onResize: (fn) => {
        process.stdout.on("resize", fn);
        return () => process.stdout.off("resize", fn);
      },
    },
    local ? `the agent at ${socket}` : `the hub at ${target?.url}`,
  );
}
