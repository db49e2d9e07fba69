// The hub's own health, for a load balancer, a service manager or `kubectl get --raw /readyz`
// (docs/kubectl.md, "The hub's health"): /livez answers while the process serves; /readyz and
// /healthz also say whether the store takes writes, since a hub whose writes fail acknowledges
// nothing and its agents' reports wait. No token needed, and nothing but the state is said (the
// store's error is in the hub's log).

import type { FlushHealth } from "./flusher.ts";
import { rfc3339 } from "./views.ts";

const HEALTH_PATHS = new Set(["/livez", "/readyz", "/healthz"]);

export function isHealthPath(path: string): boolean {
  return HEALTH_PATHS.has(path);
}

/** The answer to a health path: 200 "ok", or 503 naming the failing check. */
export function healthz(path: string, store: FlushHealth): Response {
  const text = (body: string, status: number) =>
    new Response(body, { status, headers: { "content-type": "text/plain; charset=utf-8" } });
  if (path === "/livez" || store.failingSince === undefined) return text("ok\n", 200);
  return text(
    `store: writes failing since ${rfc3339(store.failingSince)} (${store.failedFlushes} failed flushes); agents keep their reports until they work\n`,
    503,
  );
}
