// The pod watch of the local API (GET .../pods?watch=true), in the API server's shape: a stream
// of newline-delimited JSON events {"type": "ADDED" | "MODIFIED" | "DELETED", "object": Pod}.
// It starts with ADDED for every pod that matches the selectors, then sends one event per change;
// a pod that stops matching is DELETED from the stream, as the API server does. When no pod
// matches at first, the stream starts with a blank line, which watch clients skip. The server is
// told of changes by deps.onPodsChanged and also looks every resyncMs, so nothing is missed for
// long.
// Each change is found by object identity: the pod views (pod-views.ts) stay the same object
// until the pod or its status changes, and each view's JSON is made once for all watchers.

import type { Pod } from "../../api/types.ts";
import { type Clock, realClock } from "../../util/clock.ts";
import type { FrozenJson } from "./frozen-json.ts";
import type { ServerDeps } from "./types.ts";

export interface WatchOptions {
  /** Aborted when the client goes away. */
  signal: AbortSignal;
  /** Ends the stream after this many seconds (the API server's timeoutSeconds). */
  timeoutSeconds?: number;
  clock?: Clock;
  /** How often the pods are compared without being told of a change; 1 s by default. */
  resyncMs?: number;
  /** The server's JSON of its frozen pod views. */
  json: FrozenJson;
}

/** Events a slow client may leave unread before the stream is ended (it can watch again). */
const MAX_QUEUED_EVENTS = 1024;

export function watchPods(
  deps: ServerDeps,
  matches: (pod: Pod) => boolean,
  opts: WatchOptions,
): Response {
  const clock = opts.clock ?? realClock;
  const resyncMs = opts.resyncMs ?? 1000;
  const encoder = new TextEncoder();
  /** The object last sent for each pod in the stream, by uid (namespace/name without one). */
  const sent = new Map<string, Pod>();
  const cleanups: (() => void)[] = [];
  let cancelResync = () => {};
  let controller: ReadableStreamDefaultController<Uint8Array> | undefined;
  let scheduled = false;
  let closed = false;

  const close = () => {
    if (closed) return;
    closed = true;
    cancelResync();
    for (const cleanup of cleanups.splice(0)) cleanup();
    try {
      controller?.close();
    } catch {
      // already closed by the client
    }
  };

  const send = (type: "ADDED" | "MODIFIED" | "DELETED", pod: Pod) => {
    controller?.enqueue(encoder.encode(`{"type":"${type}","object":${opts.json.text(pod)}}\n`));
  };

  const compare = () => {
    scheduled = false;
    if (closed || controller === undefined) return;
    if ((controller.desiredSize ?? 0) < -MAX_QUEUED_EVENTS) return close();
    const seen = new Set<string>();
    for (const pod of deps.listPods()) {
      if (!matches(pod)) continue;
      const key = pod.metadata.uid ?? `${pod.metadata.namespace}/${pod.metadata.name}`;
      seen.add(key);
      const last = sent.get(key);
      if (last === pod) continue;
      sent.set(key, pod);
      send(last === undefined ? "ADDED" : "MODIFIED", pod);
    }
    for (const [key, pod] of sent) {
      if (seen.has(key)) continue;
      sent.delete(key);
      send("DELETED", pod);
    }
  };

  const schedule = () => {
    if (scheduled || closed) return;
    scheduled = true;
    queueMicrotask(compare);
  };

  const resync = () => {
    if (closed) return;
    schedule();
    cancelResync = clock.setTimer(resyncMs, resync);
  };

  const body = new ReadableStream<Uint8Array>(
    {
      start(c) {
        controller = c;
        if (opts.signal.aborted) return close();
        const onAbort = () => close();
        opts.signal.addEventListener("abort", onAbort, { once: true });
        cleanups.push(() => opts.signal.removeEventListener("abort", onAbort));
        const unsubscribe = deps.onPodsChanged?.(schedule);
        if (unsubscribe !== undefined) cleanups.push(unsubscribe);
        if (opts.timeoutSeconds !== undefined && opts.timeoutSeconds > 0) {
          cleanups.push(clock.setTimer(opts.timeoutSeconds * 1000, close));
        }
        compare();
        // Bun sends the response headers with the first bytes of the body: with no pod to send,
        // a blank line (which watch clients skip) lets the client know the watch is open.
        if (sent.size === 0) c.enqueue(encoder.encode("\n"));
        cancelResync = clock.setTimer(resyncMs, resync);
      },
      cancel() {
        close();
      },
    },
    { highWaterMark: 0 },
  );
  return new Response(body, { headers: { "content-type": "application/json" } });
}
