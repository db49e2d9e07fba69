// Watch streams for operators (GET /api/v1/watch): every change of the fleet pushed as
// {type, object} to the subscribers of its kind. A subscriber that does not keep up (more than
// `maxBufferedBytes` waiting) is closed rather than buffered without end.
import { StatusError } from "../api/status.ts";
import type { Change, WatchKind } from "./fleet.ts";
import type { Identity } from "./identity.ts";
import type { SocketHandler } from "./server.ts";
import { bearerToken } from "./tokens.ts";

export interface WatchSocketData {
  kind: string;
  kinds: ReadonlySet<WatchKind>;
  initial: boolean;
}

export interface WatchSocket {
  data: WatchSocketData;
  send(text: string): unknown;
  close(code?: number, reason?: string): void;
  getBufferedAmount(): number;
}

const WATCH_KINDS: readonly WatchKind[] = ["nodes", "pods", "events"];

/** Parses `?kinds=nodes,pods`; all kinds when absent. */
function parseWatchKinds(param: string | null): Set<WatchKind> | string {
  if (param === null || param === "") return new Set(WATCH_KINDS);
  const kinds = new Set<WatchKind>();
  for (const k of param.split(",")) {
    if (!(WATCH_KINDS as readonly string[]).includes(k))
      return `unknown watch kind ${JSON.stringify(k)}; use ${WATCH_KINDS.join(", ")}`;
    kinds.add(k as WatchKind);
  }
  return kinds;
}

export class WatchHub {
  private readonly subscribers = new Set<WatchSocket>();

  constructor(private readonly maxBufferedBytes = 16 * 1024 * 1024) {}

  /** Adds a subscriber, first sending it `initial` (the current objects) as ADDED. */
  add(ws: WatchSocket, initial: Change[]): void {
    for (const c of initial) if (ws.data.kinds.has(c.kind)) ws.send(frame(c));
    this.subscribers.add(ws);
  }

  remove(ws: WatchSocket): void {
    this.subscribers.delete(ws);
  }

  count(): number {
    return this.subscribers.size;
  }

  publish(change: Change): void {
    if (this.subscribers.size === 0) return;
    let text: string | undefined;
    for (const ws of this.subscribers) {
      if (!ws.data.kinds.has(change.kind)) continue;
      if (ws.getBufferedAmount() > this.maxBufferedBytes) {
        this.subscribers.delete(ws);
        ws.close(1008, "watch client too slow");
        continue;
      }
      text ??= frame(change);
      ws.send(text);
    }
  }

  closeAll(): void {
    for (const ws of this.subscribers) ws.close(1001, "the hub is stopping");
    this.subscribers.clear();
  }
}

function frame(c: Change): string {
  return JSON.stringify({ type: c.type, object: c.object });
}

/** The upgrade of GET /api/v1/watch: the operator token (header or ?token=) and the kinds. */
export function watchUpgrade(
  identity: Pick<Identity, "isOperator">,
): (req: Request, url: URL) => { data: WatchSocketData } | Response {
  return (req, url) => {
    const token =
      bearerToken(req.headers.get("authorization")) ?? url.searchParams.get("token") ?? undefined;
    if (!identity.isOperator(token))
      return new StatusError(
        "Unauthorized",
        "a valid operator token is required (Authorization: Bearer or ?token=)",
      ).toResponse();
    const kinds = parseWatchKinds(url.searchParams.get("kinds"));
    if (typeof kinds === "string") return new StatusError("BadRequest", kinds).toResponse();
    return {
      data: { kind: "watch", kinds, initial: url.searchParams.get("initial") !== "false" },
    };
  };
}

/** The socket events of watch streams, for the server; `initial` is what a new one gets first. */
export function watchSockets(watch: WatchHub, initial: () => Change[]): SocketHandler {
  return {
    open: (ws) => {
      const w = ws as unknown as WatchSocket;
      watch.add(w, w.data.initial ? initial() : []);
    },
    message: () => {},
    close: (ws) => watch.remove(ws as unknown as WatchSocket),
  };
}
