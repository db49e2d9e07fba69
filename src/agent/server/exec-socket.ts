// The local API's interactive exec (`fleetlet exec -it` on the device): a WebSocket upgrade of
// .../pods/NAME/exec speaking the remote-command channel protocol, run by the same stream
// handlers as the hub's exec (src/agent/streams), so both paths behave alike.
import type { Server, ServerWebSocket } from "bun";
import { pickProtocol, REMOTE_COMMAND_PROTOCOLS } from "../../protocol/remotecommand.ts";
import type { StreamOpen } from "../../protocol/streams.ts";
import { ExecSession } from "../../streams/exec-session.ts";
import { execRequest } from "../../streams/requests.ts";
import type { OpenStream } from "../../streams/types.ts";
import { badRequest, podNotFound } from "./status.ts";
import type { ServerDeps } from "./types.ts";

export interface ExecSocketData {
  protocol: string;
  req: Extract<StreamOpen, { kind: "exec" }>;
  session?: ExecSession;
}

/** Upgrades an exec request; returns undefined once upgraded, or throws a StatusError. */
export function upgradeExec(
  deps: ServerDeps,
  req: Request,
  url: URL,
  server: Server<ExecSocketData>,
  namespace: string,
  name: string,
): undefined {
  const pod = deps.getPod(namespace, name);
  if (pod === undefined) throw podNotFound(name);
  const execReq = execRequest(url.searchParams, namespace, pod);
  const protocol = pickProtocol(
    req.headers.get("sec-websocket-protocol"),
    REMOTE_COMMAND_PROTOCOLS,
  );
  if (protocol === undefined)
    throw badRequest(`exec needs one of the subprotocols ${REMOTE_COMMAND_PROTOCOLS.join(", ")}`);
  const data: ExecSocketData = { protocol, req: execReq };
  if (server.upgrade(req, { data, headers: { "Sec-WebSocket-Protocol": protocol } }))
    return undefined;
  throw badRequest("exec with a terminal or stdin needs a WebSocket upgrade");
}

/** The WebSocket events of interactive execs. */
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
