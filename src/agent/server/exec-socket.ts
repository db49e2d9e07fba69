// The local API's interactive exec and attach (`fleetlet exec -it`, `fleetlet attach -it` on the
// device): a WebSocket upgrade of .../pods/NAME/exec or .../attach speaking the remote-command
// channel protocol, run by the same stream handlers as the hub's (src/agent/streams), so both
// paths behave alike.
import type { Server, ServerWebSocket } from "bun";
import { pickProtocol, REMOTE_COMMAND_PROTOCOLS } from "../../protocol/remotecommand.ts";
import { ExecSession, type RemoteCommandOpen } from "../../streams/exec-session.ts";
import { attachRequest, execRequest } from "../../streams/requests.ts";
import type { OpenStream } from "../../streams/types.ts";
import { badRequest, podNotFound } from "./status.ts";
import type { ServerDeps } from "./types.ts";

export interface ExecSocketData {
  protocol: string;
  req: RemoteCommandOpen;
  session?: ExecSession;
}

/** Upgrades an exec or attach request; returns undefined once upgraded, or throws a
 * StatusError. */
export function upgradeRemoteCommand(
  deps: ServerDeps,
  req: Request,
  url: URL,
  server: Server<ExecSocketData>,
  target: { kind: RemoteCommandOpen["kind"]; namespace: string; name: string },
): undefined {
  const { kind, namespace, name } = target;
  const pod = deps.getPod(namespace, name);
  if (pod === undefined) throw podNotFound(name);
  const build = kind === "exec" ? execRequest : attachRequest;
  const streamReq = build(url.searchParams, namespace, pod);
  const protocol = pickProtocol(
    req.headers.get("sec-websocket-protocol"),
    REMOTE_COMMAND_PROTOCOLS,
  );
  if (protocol === undefined)
    throw badRequest(
      `${kind} needs one of the subprotocols ${REMOTE_COMMAND_PROTOCOLS.join(", ")}`,
    );
  const data: ExecSocketData = { protocol, req: streamReq };
  if (server.upgrade(req, { data, headers: { "Sec-WebSocket-Protocol": protocol } }))
    return undefined;
  throw badRequest(`${kind} with a terminal or stdin needs a WebSocket upgrade`);
}

/** The WebSocket events of interactive execs and attaches. */
export function execWebSocket(open: OpenStream) {
  return {
    open(ws: ServerWebSocket<ExecSocketData>) {
      ws.data.session = new ExecSession({
        socket: ws,
        protocol: ws.data.protocol,
        open,
        req: ws.data.req,
      });
      void ws.data.session.start();
    },
    message: (ws: ServerWebSocket<ExecSocketData>, m: string | Buffer) =>
      ws.data.session?.message(m),
    drain: (ws: ServerWebSocket<ExecSocketData>) => ws.data.session?.drain(),
    close: (ws: ServerWebSocket<ExecSocketData>) => ws.data.session?.closed(),
  };
}
