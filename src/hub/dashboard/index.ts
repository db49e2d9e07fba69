// The hub's dashboard: a page at `/` and its files at `/ui/<name>`, all embedded in the binary at
// build time (see embed.ts). The page talks to the operator API and the watch stream with the
// operator token the user enters; these routes need no token, since they hold no fleet data.
import { StatusError } from "../../api/status.ts";
import { asset } from "./embed.ts" with { type: "macro" };

interface Asset {
  body: string;
  type: string;
}

const JS = "text/javascript; charset=utf-8";

/** Every file the dashboard serves, by its path. */
const DASHBOARD_ASSETS: Readonly<Record<string, Asset>> = {
  "/": { body: asset("index.html"), type: "text/html; charset=utf-8" },
  "/ui/style.css": { body: asset("style.css"), type: "text/css; charset=utf-8" },
  "/ui/parts.css": { body: asset("parts.css"), type: "text/css; charset=utf-8" },
  "/ui/icon.svg": { body: asset("icon.svg"), type: "image/svg+xml" },
  "/ui/app.js": { body: asset("app.js"), type: JS },
  "/ui/dom.js": { body: asset("dom.js"), type: JS },
  "/ui/model.js": { body: asset("model.js"), type: JS },
  "/ui/skew.js": { body: asset("skew.js"), type: JS },
  "/ui/live.js": { body: asset("live.js"), type: JS },
  "/ui/fleet-view.js": { body: asset("fleet-view.js"), type: JS },
  "/ui/node-view.js": { body: asset("node-view.js"), type: JS },
  "/ui/health-view.js": { body: asset("health-view.js"), type: JS },
  "/ui/sparkline.js": { body: asset("sparkline.js"), type: JS },
  "/ui/pod-view.js": { body: asset("pod-view.js"), type: JS },
  "/ui/daemonset-view.js": { body: asset("daemonset-view.js"), type: JS },
  "/ui/rollout-model.js": { body: asset("rollout-model.js"), type: JS },
  "/ui/poll.js": { body: asset("poll.js"), type: JS },
  "/ui/agent-model.js": { body: asset("agent-model.js"), type: JS },
  "/ui/agent-view.js": { body: asset("agent-view.js"), type: JS },
};

/** Nothing but the hub itself: no script, style, image or connection elsewhere. */
const SECURITY_HEADERS = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-cache",
};

/** Whether `pathname` is the dashboard's (the page or one of its files). */
export function isDashboardPath(pathname: string): boolean {
  return pathname === "/" || pathname === "/index.html" || pathname.startsWith("/ui/");
}

/** Serves a dashboard path (see isDashboardPath): the file, 404, or 405 for other methods. */
export function serveDashboard(req: Request, url: URL): Response {
  const path = url.pathname === "/index.html" ? "/" : url.pathname;
  if (req.method !== "GET" && req.method !== "HEAD")
    return new StatusError(
      "MethodNotAllowed",
      `${req.method} ${url.pathname} is not allowed; the dashboard is read with GET`,
    ).toResponse();
  const file = DASHBOARD_ASSETS[path];
  if (file === undefined)
    return new StatusError("NotFound", `the dashboard has no file ${path}`).toResponse();
  return new Response(req.method === "HEAD" ? null : file.body, {
    headers: { ...SECURITY_HEADERS, "content-type": file.type },
  });
}
