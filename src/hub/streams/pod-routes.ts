// A pod's log, exec, attach and port-forward at their Kubernetes paths (docs/kubectl.md): the
// request is checked at the hub (operator token, pod, container, options) so refusals are the API
// server's Status, then carried to the pod's device as a stream (broker.ts). Exec, attach and
// port-forward are WebSockets and are written to the audit log.
import type { Server, ServerWebSocket } from "bun";
import { StatusError } from "../../api/status.ts";
import { pickProtocol, REMOTE_COMMAND_PROTOCOLS } from "../../protocol/remotecommand.ts";
import { ExecSession, type RemoteCommandOpen } from "../../streams/exec-session.ts";
import { attachRequest, execRequest, logsRequest } from "../../streams/requests.ts";
import { StreamFailure } from "../../streams/types.ts";
import type { SocketData, SocketHandler, Upgrade } from "../server.ts";
import { logStreamResponse } from "./log-response.ts";
import { failureResponse, type PodStreamDeps } from "./pod-deps.ts";
import { portForwardSockets, portForwardUpgrade } from "./portforward.ts";

export type { PodStreamDeps };
export { portForwardSockets };

const POD_SUB = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)\/(log|exec|attach|portforward)$/;

/** The pod and subresource of a path, or undefined (also for a bad %-escape: the path names no
 * pod, and the API answers it as one it does not serve). */
export function podSubresource(
  path: string,
): { namespace: string; name: string; sub: string } | undefined {
  const m = POD_SUB.exec(path);
  if (m === null) return undefined;
  try {
    return {
      namespace: decodeURIComponent(m[1] ?? ""),
      name: decodeURIComponent(m[2] ?? ""),
      sub: m[3] ?? "",
    };
  } catch {
    return undefined;
  }
}

function target(d: PodStreamDeps, namespace: string, name: string) {
  const found = d.findPod(namespace, name);
  if (found === undefined)
    throw new StatusError("NotFound", `pods "${name}" not found`, { name, kind: "pods" });
  return found;
}

/** GET .../pods/NAME/log: the container's log from the device, streamed as text. */
export async function podLog(
  d: PodStreamDeps,
  req: Request,
  url: URL,
  namespace: string,
  name: string,
): Promise<Response> {
  d.authorize(req, url);
  const { node, pod } = target(d, namespace, name);
  const open = logsRequest(url.searchParams, namespace, pod);
  return logStreamResponse(d.opener(node), open, req.signal);
}

/** An exec's or attach's socket (both are remote-command sessions, of the socket kind "exec"). */
interface ExecSocketData extends SocketData {
  kind: "exec";
  protocol: string;
  node: string;
  req: RemoteCommandOpen;
  auditId: number;
  session?: ExecSession;
}

/** The upgrade of .../pods/NAME/exec or .../attach: checked here, refused with a Status before
 * upgrading. */
async function execUpgrade(
  d: PodStreamDeps,
  req: Request,
  url: URL,
  server: Server<SocketData>,
  sub: { namespace: string; name: string; sub: string },
) {
  const { namespace, name } = sub;
  d.authorize(req, url);
  const { node, pod } = target(d, namespace, name);
  const kind = sub.sub === "attach" ? "attach" : "exec";
  const build = kind === "exec" ? execRequest : attachRequest;
  const execReq: RemoteCommandOpen = build(url.searchParams, namespace, pod);
  // Checked after the pod and container, so that a client falling back to SPDY gets the same
  // refusal as on its WebSocket attempt.
  const protocol = pickProtocol(
    req.headers.get("sec-websocket-protocol"),
    REMOTE_COMMAND_PROTOCOLS,
  );
  if (req.headers.get("upgrade")?.toLowerCase() !== "websocket" || protocol === undefined)
    throw new StatusError(
      "BadRequest",
      `${kind} needs a WebSocket upgrade with one of the subprotocols ${REMOTE_COMMAND_PROTOCOLS.join(", ")} (the hub does not serve SPDY)`,
    );
  const auditId = await d.audit.start({
    kind,
    user: "operator",
    client: server.requestIP(req)?.address ?? "",
    userAgent: req.headers.get("user-agent") ?? "",
    node,
    namespace,
    pod: name,
    container: execReq.container,
    ...(execReq.kind === "exec" && { command: execReq.command }),
    tty: execReq.tty,
  });
  const data: ExecSocketData = { kind: "exec", protocol, node, req: execReq, auditId };
  return { data: data as SocketData, headers: { "Sec-WebSocket-Protocol": protocol } };
}

/** How an exec or attach ended, as the audit log says it. */
function outcome(end: { exitCode?: number; error?: string }): string {
  return end.error !== undefined
    ? end.error === "the client left"
      ? "client left"
      : `error: ${end.error}`
    : `exit ${end.exitCode ?? 0}`;
}

export function execSockets(d: PodStreamDeps): SocketHandler {
  return {
    open(ws) {
      const w = ws as ServerWebSocket<ExecSocketData>;
      const session = new ExecSession({
        socket: w,
        protocol: w.data.protocol,
        open: d.opener(w.data.node),
        req: w.data.req,
        onEnd: (end) => void d.audit.end(w.data.auditId, outcome(end)),
      });
      w.data.session = session;
      void session.start();
    },
    message: (ws, m) => (ws as ServerWebSocket<ExecSocketData>).data.session?.message(m),
    drain: (ws) => (ws as ServerWebSocket<ExecSocketData>).data.session?.drain(),
    close: (ws) => (ws as ServerWebSocket<ExecSocketData>).data.session?.closed(),
  };
}

/** The upgrade of a pod's exec, attach or port-forward, or undefined for other paths. */
export function streamUpgrade(d: PodStreamDeps, url: URL): Upgrade | undefined {
  const sub = podSubresource(url.pathname);
  if (sub === undefined || sub.sub === "log") return undefined;
  return (req, u, server) =>
    refusing(() =>
      sub.sub === "exec" || sub.sub === "attach"
        ? execUpgrade(d, req, u, server, sub)
        : portForwardUpgrade(d, req, u, server, sub.namespace, sub.name),
    );
}

/** A refusal thrown as a StatusError answered as its Status. */
async function refusing<T>(fn: () => Promise<T>): Promise<T | Response> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof StatusError) return err.toResponse();
    throw err;
  }
}

/** Runs a route, answering a StatusError (or StreamFailure) as its Status. */
export async function guarded(req: Request, fn: () => Promise<Response>): Promise<Response> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof StatusError) return err.toResponse();
    if (err instanceof StreamFailure) return failureResponse(err);
    return new StatusError(
      "InternalError",
      `${req.method} ${new URL(req.url).pathname} failed: ${(err as Error).message}`,
    ).toResponse();
  }
}
