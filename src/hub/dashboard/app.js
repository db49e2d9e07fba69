// @ts-check
// The dashboard's entry: asks for the operator token once (kept in sessionStorage), keeps the
// live fleet state from the watch stream, and draws the page the location hash names:
// #/ (fleet), #/nodes/NAME (device), #/nodes/NAME/pods/NAMESPACE/POD (pod), #/daemonsets and
// #/daemonsets/NAMESPACE/NAME (deploys and their rollouts).
import { mountDaemonSet, mountDaemonSets } from "./daemonset-view.js";
import { h } from "./dom.js";
import { mountFleet } from "./fleet-view.js";
import { checkToken, FleetState, Live } from "./live.js";
import { mountNode } from "./node-view.js";
import { mountPod } from "./pod-view.js";
import { HttpError } from "./poll.js";

const TOKEN_KEY = "fleetlet.operatorToken";
/** Redraws are coalesced to at most one per this many ms (more for a large fleet). */
const REDRAW_MS = 80;
const LARGE_FLEET_REDRAW_MS = 1000;
/** Relative times are refreshed this often. */
const TICK_MS = 5000;

const main = /** @type {HTMLElement} */ (document.getElementById("main"));
const conn = /** @type {HTMLElement} */ (document.getElementById("conn"));
const signout = /** @type {HTMLButtonElement} */ (document.getElementById("signout"));

/** @type {{ update: (now?: number) => void, title: string } | undefined} */
let view;
/** @type {Live | undefined} */
let live;
const state = new FleetState();

/**
 * The sign-in form; `message` explains why it is shown again.
 * @param {string} [message]
 */
function showLogin(message) {
  view = undefined;
  conn.hidden = true;
  signout.hidden = true;
  const input = h("input", {
    id: "token",
    type: "password",
    attrs: {
      autocomplete: "off",
      spellcheck: "false",
      required: "",
      placeholder: "flo_…",
      "aria-describedby": "token-help",
    },
  });
  const error = h(
    "p",
    { id: "login-error", cls: "error", attrs: { role: "alert" } },
    message ?? "",
  );
  error.hidden = !message;
  const button = h("button", { cls: "btn btn-primary", type: "submit" }, "Open dashboard");
  const form = h(
    "form",
    { cls: "login panel", id: "login" },
    h("h1", null, "Sign in"),
    h("label", { attrs: { for: "token" } }, "Operator token"),
    input,
    h(
      "p",
      { id: "token-help", cls: "muted small" },
      "The hub printed it when it first started; it is also in ",
      h("code", null, "<data dir>/operator-token"),
      ". It stays in this browser tab only.",
    ),
    error,
    button,
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const token = input.value.trim();
    button.disabled = true;
    error.hidden = true;
    const check = await checkToken(token);
    button.disabled = false;
    if (check === "ok") {
      sessionStorage.setItem(TOKEN_KEY, token);
      start(token);
      return;
    }
    error.textContent =
      check === "unauthorized"
        ? "The hub refused this token. Check that you copied the whole operator token of this hub."
        : `Cannot sign in: ${check}.`;
    error.hidden = false;
    input.select();
  });
  main.replaceChildren(form);
  document.title = "Sign in · fleetlet hub";
  input.focus();
}

/** @param {import("./live.js").ConnStatus} s */
function showStatus(s) {
  conn.hidden = false;
  conn.className = `conn conn-${s.state}`;
  if (s.state === "live") conn.textContent = "Live";
  else if (s.state === "connecting") conn.textContent = "Connecting…";
  else {
    const secs = s.retryAt ? Math.max(0, Math.ceil((s.retryAt - Date.now()) / 1000)) : 0;
    conn.textContent = `Reconnecting${secs ? ` in ${secs}s` : "…"}`;
    conn.title = s.error ?? "";
  }
}

/** Draws the page for the current hash. */
function route() {
  if (!live) return;
  const parts = location.hash
    .replace(/^#\/?/, "")
    .split("/")
    .filter(Boolean)
    .map(decodeURIComponent);
  const token = live.opts.token;
  /** @param {string} path */
  const api = async (path) => {
    const res = await fetch(path, { headers: { authorization: `Bearer ${token}` } });
    if (!res.ok) throw new HttpError(res.status, path);
    return res.json();
  };
  if (parts[0] === "daemonsets" && parts[1] && parts[2])
    view = mountDaemonSet(main, api, parts[1], parts[2]);
  else if (parts[0] === "daemonsets") view = mountDaemonSets(main, api);
  else if (parts[0] === "nodes" && parts[1] && parts[2] === "pods" && parts[3] && parts[4])
    view = mountPod(main, state, parts[1], parts[3], parts[4]);
  else if (parts[0] === "nodes" && parts[1]) view = mountNode(main, state, parts[1], api);
  else view = mountFleet(main, state, api);
  view.update();
  document.title = `${view.title} · fleetlet hub`;
  window.scrollTo(0, 0);
}

/** @type {ReturnType<typeof setTimeout> | undefined} */
let pending;
function redraw() {
  if (pending !== undefined) return;
  pending = setTimeout(
    () => {
      pending = undefined;
      view?.update();
    },
    state.nodes.size > 1000 ? LARGE_FLEET_REDRAW_MS : REDRAW_MS,
  );
}

/** @param {string} token */
function start(token) {
  signout.hidden = false;
  live = new Live({
    token,
    state,
    onChange: redraw,
    onStatus: showStatus,
    onUnauthorized(message) {
      sessionStorage.removeItem(TOKEN_KEY);
      live = undefined;
      showLogin(`${message} Enter the current operator token.`);
    },
  });
  route();
  void live.connect();
}

signout.addEventListener("click", () => {
  live?.stop();
  live = undefined;
  sessionStorage.removeItem(TOKEN_KEY);
  showLogin();
});
window.addEventListener("hashchange", route);
setInterval(() => view?.update(), TICK_MS);

const saved = sessionStorage.getItem(TOKEN_KEY);
if (saved) start(saved);
else showLogin();
