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
  const watch = new PodWatch(deps, matches, opts);
  const body = new ReadableStream<Uint8Array>(
    { start: (c) => watch.start(c), cancel: () => watch.close() },
    { highWaterMark: 0 },
  );
  return new Response(body, { headers: { "content-type": "application/json" } });
}

const encoder = new TextEncoder();

/** One watch stream: what it sent, and the timers and subscriptions to end with it. */
class PodWatch {
  private readonly clock: Clock;
  private readonly resyncMs: number;
  /** The object last sent for each pod in the stream, by uid (namespace/name without one). */
  private readonly sent = new Map<string, Pod>();
  /** Run once when the stream ends: the abort listener, the subscription, the timeout. */
  private readonly cleanups: (() => void)[] = [];
  private cancelResync = () => {};
  /** Set when the stream starts. */
  private controller: ReadableStreamDefaultController<Uint8Array> | undefined;
  /** Whether a compare() is queued. */
  private scheduled = false;
  private closed = false;

  constructor(
    private readonly deps: ServerDeps,
    private readonly matches: (pod: Pod) => boolean,
    private readonly opts: WatchOptions,
  ) {
    this.clock = opts.clock ?? realClock;
    this.resyncMs = opts.resyncMs ?? 1000;
  }

  start(c: ReadableStreamDefaultController<Uint8Array>): void {
    const { opts, clock } = this;
    this.controller = c;
    if (opts.signal.aborted) {
      this.close();
      return;
    }
    const onAbort = () => this.close();
    opts.signal.addEventListener("abort", onAbort, { once: true });
    this.cleanups.push(() => opts.signal.removeEventListener("abort", onAbort));
    const unsubscribe = this.deps.onPodsChanged?.(this.schedule);
    if (unsubscribe !== undefined) this.cleanups.push(unsubscribe);
    if (opts.timeoutSeconds !== undefined && opts.timeoutSeconds > 0) {
      this.cleanups.push(clock.setTimer(opts.timeoutSeconds * 1000, this.close));
    }
    this.compare();
    // Bun sends the response headers with the first bytes of the body: with no pod to send,
    // a blank line (which watch clients skip) lets the client know the watch is open.
    if (this.sent.size === 0) c.enqueue(encoder.encode("\n"));
    this.cancelResync = clock.setTimer(this.resyncMs, this.resync);
  }

  readonly close = (): void => {
    if (this.closed) return;
    this.closed = true;
    this.cancelResync();
    for (const cleanup of this.cleanups.splice(0)) cleanup();
    try {
      this.controller?.close();
    } catch {
      // already closed by the client
    }
  };

  /** Queues one compare() for the pods' changes (many changes in a tick make one). */
  private readonly schedule = (): void => {
    if (this.scheduled || this.closed) return;
    this.scheduled = true;
    queueMicrotask(() => this.compare());
  };

  private readonly resync = (): void => {
    if (this.closed) return;
    this.schedule();
    this.cancelResync = this.clock.setTimer(this.resyncMs, this.resync);
  };

  /** Sends an event for every matching pod that changed, appeared or went away since last sent;
   * ends the stream of a client that reads too slowly. */
  private compare(): void {
    this.scheduled = false;
    const { controller, sent } = this;
    if (this.closed || controller === undefined) return;
    if ((controller.desiredSize ?? 0) < -MAX_QUEUED_EVENTS) {
      this.close();
      return;
    }
    const seen = new Set<string>();
    for (const pod of this.deps.listPods()) {
      if (!this.matches(pod)) continue;
      const key = pod.metadata.uid ?? `${pod.metadata.namespace}/${pod.metadata.name}`;
      seen.add(key);
      const last = sent.get(key);
      if (last === pod) continue;
      sent.set(key, pod);
      this.send(last === undefined ? "ADDED" : "MODIFIED", pod);
    }
    for (const [key, pod] of sent) {
      if (seen.has(key)) continue;
      sent.delete(key);
      this.send("DELETED", pod);
    }
  }

  private send(type: "ADDED" | "MODIFIED" | "DELETED", pod: Pod): void {
    this.controller?.enqueue(
      encoder.encode(`{"type":"${type}","object":${this.opts.json.text(pod)}}\n`),
    );
  }
}
