// Reading resources as the API server answers kubectl: lists and gets with label and field
// selectors, as JSON or as a meta.k8s.io Table when the Accept header asks for one (so kubectl's
// columns are the server's, -o wide included), and watches (?watch=true) streamed as one JSON
// event per line, from a list's resourceVersion on.
import { parseFieldSelector, parseLabelSelector, SelectorError } from "../../api/selectors.ts";
import { failureStatus, StatusError } from "../../api/status.ts";
import type { Clock } from "../../util/clock.ts";
import type { ChangeLog, ChangeType } from "./changes.ts";
import { type KubeObject, type KubeResource, qualifiedName } from "./resources.ts";

export interface ReadContext {
  changes: ChangeLog;
  clock: Clock;
  /** How often a watch of a resource without a change log compares its list (ms). */
  pollMs: number;
}

/** Whether the Accept header asks for a Table. */
export function wantsTable(accept: string | null): boolean {
  return (accept ?? "").split(",").some((a) => /\bas=Table\b/.test(a));
}

/** The device an object is of: a pod's node, an event's source host. */
function nodeOf(o: KubeObject): string | undefined {
  const x = o as { spec?: { nodeName?: string }; source?: { host?: string } };
  return x.spec?.nodeName ?? x.source?.host;
}

/** The filter of ?labelSelector=, ?fieldSelector= (and the hub's own ?nodeName=). */
function selection(r: KubeResource, q: URLSearchParams): (o: KubeObject) => boolean {
  try {
    const labels = parseLabelSelector(q.get("labelSelector") ?? "");
    const fields = parseFieldSelector(q.get("fieldSelector") ?? "", r.fields);
    const node = q.get("nodeName");
    return (o) => labels(o.metadata.labels) && fields(o) && (node === null || nodeOf(o) === node);
  } catch (err) {
    if (err instanceof SelectorError) throw new StatusError("BadRequest", err.message);
    throw err;
  }
}

/** The object as served: fleet objects carry the version of their last change. */
function served(ctx: ReadContext, r: KubeResource, o: KubeObject): KubeObject {
  const typed = { apiVersion: r.group === "" ? "v1" : `${r.group}/v1`, kind: r.kind, ...o };
  return r.changes === "changes" ? ctx.changes.withVersion(r.name, typed) : typed;
}

function listVersion(ctx: ReadContext, r: KubeResource, items: KubeObject[]): string {
  if (r.changes === "changes") return String(ctx.changes.current());
  return String(Math.max(0, ...items.map((o) => Number(o.metadata.resourceVersion ?? 0))));
}

/** A meta.k8s.io/v1 Table of `objects`. */
function table(
  r: KubeResource,
  objects: KubeObject[],
  now: number,
  rv: string,
  includeObject: string | null,
) {
  return {
    kind: "Table",
    apiVersion: "meta.k8s.io/v1",
    metadata: { resourceVersion: rv },
    columnDefinitions: r.table.columns,
    rows: objects.map((o) => ({
      cells: r.table.cells(o, now),
      object:
        includeObject === "Object"
          ? o
          : includeObject === "None"
            ? undefined
            : { kind: "PartialObjectMetadata", apiVersion: "meta.k8s.io/v1", metadata: o.metadata },
    })),
  };
}

const json = (body: unknown) =>
  new Response(`${JSON.stringify(body)}\n`, { headers: { "content-type": "application/json" } });

/** GET of a list (or a watch, with ?watch=true). */
export function listResponse(
  ctx: ReadContext,
  r: KubeResource,
  namespace: string | undefined,
  req: Request,
  q: URLSearchParams,
): Response {
  const matches = selection(r, q);
  const asTable = wantsTable(req.headers.get("accept"));
  // The hub's own ?namespace= (its CLI and dashboard) is the namespaced path's.
  namespace ??= q.get("namespace") ?? undefined;
  const watch = q.get("watch");
  if (watch === "true" || watch === "1") return watchResponse(ctx, r, namespace, matches, req, q);
  const items = r
    .list(namespace)
    .filter(matches)
    .map((o) => served(ctx, r, o));
  const rv = listVersion(ctx, r, items);
  if (asTable) return json(table(r, items, ctx.clock.now(), rv, q.get("includeObject")));
  const apiVersion = r.group === "" ? "v1" : `${r.group}/v1`;
  return json({ apiVersion, kind: `${r.kind}List`, metadata: { resourceVersion: rv }, items });
}

function notFound(r: KubeResource, name: string): StatusError {
  return new StatusError("NotFound", `${qualifiedName(r)} "${name}" not found`, {
    name,
    ...(r.group !== "" && { group: r.group }),
    kind: r.name,
  });
}

/** GET of one object. */
export function getResponse(
  ctx: ReadContext,
  r: KubeResource,
  namespace: string,
  name: string,
  req: Request,
  q: URLSearchParams,
): Response {
  const o = r.get(namespace, name);
  if (o === undefined) throw notFound(r, name);
  const object = served(ctx, r, o);
  if (wantsTable(req.headers.get("accept")))
    return json(
      table(
        r,
        [object],
        ctx.clock.now(),
        object.metadata.resourceVersion ?? "",
        q.get("includeObject"),
      ),
    );
  return json(object);
}

/** Each watch event as a line: its object as JSON, or as a one-row Table when asked. */
function encoder(ctx: ReadContext, r: KubeResource, req: Request, q: URLSearchParams): Encode {
  const asTable = wantsTable(req.headers.get("accept"));
  const includeObject = q.get("includeObject");
  return (type, o) =>
    `${JSON.stringify({
      type,
      object: asTable
        ? table(r, [o], ctx.clock.now(), o.metadata.resourceVersion ?? "", includeObject)
        : o,
    })}\n`;
}

/** A watch: one JSON event per line (after a first blank line) until the client leaves or
 * ?timeoutSeconds= passes. */
function watchResponse(
  ctx: ReadContext,
  r: KubeResource,
  namespace: string | undefined,
  matches: (o: KubeObject) => boolean,
  req: Request,
  q: URLSearchParams,
): Response {
  const inScope = (o: KubeObject) =>
    (namespace === undefined || (o.metadata.namespace ?? "default") === namespace) && matches(o);
  const encode = encoder(ctx, r, req, q);
  const from = q.get("resourceVersion");
  const timeout = Number(q.get("timeoutSeconds") ?? 0);
  let stop = () => {};
  const body = new ReadableStream<string>({
    start(controller) {
      const send = (text: string) => {
        try {
          controller.enqueue(text);
        } catch {
          stop();
        }
      };
      const end = () => {
        stop();
        try {
          controller.close();
        } catch {
          // already closed
        }
      };
      // Bun sends no headers before the body's first byte; watch decoders skip a blank line.
      send("\n");
      const expired = (why: string) => {
        send(`${JSON.stringify({ type: "ERROR", object: failureStatus("Expired", why, 410) })}\n`);
        end();
      };
      const source =
        r.changes === "changes"
          ? changeSource(ctx, r, from, inScope, send, encode, expired)
          : pollSource(ctx, r, namespace, from, inScope, send, encode);
      if (typeof source === "string") return expired(source);
      const cancelTimer = timeout > 0 ? ctx.clock.setTimer(timeout * 1000, end) : undefined;
      const onAbort = () => end();
      req.signal.addEventListener("abort", onAbort, { once: true });
      stop = () => {
        source();
        cancelTimer?.();
        req.signal.removeEventListener("abort", onAbort);
        stop = () => {};
      };
    },
    cancel() {
      stop();
    },
  });
  return new Response(body, { headers: { "content-type": "application/json" } });
}

type Encode = (type: ChangeType, o: KubeObject) => string;

/** Watch of a fleet resource: the changes since `from` (else every object as ADDED), then
 * each change as it happens. Returns the unsubscribe, or why `from` is too old. */
function changeSource(
  ctx: ReadContext,
  r: KubeResource,
  from: string | null,
  inScope: (o: KubeObject) => boolean,
  send: (text: string) => void,
  encode: Encode,
  expired: (why: string) => void,
): (() => void) | string {
  const rv = from === null || from === "" || from === "0" ? undefined : Number(from);
  if (rv !== undefined) {
    const past = Number.isFinite(rv) ? ctx.changes.since(rv) : "gone";
    if (past === "gone") return `too old resource version: ${from} (${ctx.changes.current()})`;
    for (const c of past)
      if (c.resource === r.name && inScope(c.object)) send(encode(c.type, c.object));
  } else {
    for (const o of r.list().filter(inScope)) send(encode("ADDED", served(ctx, r, o)));
  }
  // A replica may be behind the one that answered the list: what it reads up to `from` later
  // was in that list.
  return ctx.changes.subscribe(
    (c) => {
      if (rv !== undefined && c.rv <= rv) return;
      if (c.resource === r.name && inScope(c.object))
        send(encode(c.type, served(ctx, r, c.object)));
    },
    // This replica loaded its view again (it fell behind the shared log's trim).
    () => expired(`the hub reloaded its view at ${ctx.changes.current()}: list again`),
  );
}

/** Watch of a resource without a change log: its list compared every pollMs. */
function pollSource(
  ctx: ReadContext,
  r: KubeResource,
  namespace: string | undefined,
  from: string | null,
  inScope: (o: KubeObject) => boolean,
  send: (text: string) => void,
  encode: Encode,
): () => void {
  const key = (o: KubeObject) => o.metadata.uid ?? `${o.metadata.namespace}/${o.metadata.name}`;
  // A DaemonSet's status changes without a new resourceVersion: compare it too.
  const version = (o: KubeObject) =>
    `${o.metadata.resourceVersion}/${JSON.stringify((o as { status?: unknown }).status ?? null)}`;
  let seen = new Map<string, KubeObject>();
  const snapshot = () =>
    new Map(
      r
        .list(namespace)
        .filter(inScope)
        .map((o) => [key(o), served(ctx, r, o)]),
    );
  if (from === null || from === "" || from === "0") {
    seen = snapshot();
    for (const o of seen.values()) send(encode("ADDED", o));
  } else {
    const after = Number(from);
    for (const [k, o] of snapshot()) {
      if (Number(o.metadata.resourceVersion ?? 0) > after) send(encode("MODIFIED", o));
      seen.set(k, o);
    }
  }
  const poll = () => {
    cancel = ctx.clock.setTimer(ctx.pollMs, poll);
    const now = snapshot();
    for (const [k, o] of now) {
      const old = seen.get(k);
      if (old === undefined) send(encode("ADDED", o));
      else if (version(old) !== version(o)) send(encode("MODIFIED", o));
    }
    for (const [k, o] of seen) if (!now.has(k)) send(encode("DELETED", o));
    seen = now;
  };
  let cancel = ctx.clock.setTimer(ctx.pollMs, poll);
  return () => cancel();
}
