// @ts-check
// DOM helpers for the dashboard. Every string reaches the page as a text node or a property,
// never as markup: whatever a device reports is shown, not interpreted.

/** @typedef {Node | string | number | null | undefined | false} Child */
/** @typedef {Child | ChildList} Children */
/** @typedef {Array<Children>} ChildList */
/** @typedef {{ cls?: string, href?: string, title?: string, id?: string, type?: string, attrs?: Record<string, string>, on?: Record<string, EventListener> }} Props */

/**
 * An element with properties and children (strings become text nodes; null/false are skipped).
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Props | null} [props]
 * @param {...Children} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  if (props) {
    if (props.cls) el.className = props.cls;
    if (props.id) el.id = props.id;
    if (props.title) el.title = props.title;
    if (props.href !== undefined && el instanceof HTMLAnchorElement) el.href = props.href;
    if (props.type !== undefined) el.setAttribute("type", props.type);
    for (const [k, v] of Object.entries(props.attrs ?? {})) el.setAttribute(k, v);
    for (const [k, f] of Object.entries(props.on ?? {})) el.addEventListener(k, f);
  }
  append(el, children);
  return el;
}

/**
 * @param {Element} el
 * @param {Children[]} children
 */
function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(typeof c === "number" ? String(c) : c);
  }
}

/** @typedef {"ok" | "warn" | "bad" | "none"} Tone */

/**
 * A status label: coloured by tone and marked with a symbol, and readable as text alone.
 * @param {string} label
 * @param {Tone} tone
 * @param {string} [title]
 */
export function badge(label, tone, title) {
  return h("span", { cls: `badge badge-${tone}`, ...(title ? { title } : {}) }, label);
}

/**
 * A table with a header row; `rows` are arrays of cells. An empty table shows `empty`.
 * @param {string[]} head
 * @param {Children[][]} rows
 * @param {string} empty
 * @param {string} [cls]
 */
export function table(head, rows, empty, cls) {
  if (rows.length === 0) return h("p", { cls: "empty" }, empty);
  return h(
    "div",
    { cls: "table-wrap" },
    h(
      "table",
      { cls: cls ?? "" },
      h(
        "thead",
        null,
        h(
          "tr",
          null,
          head.map((t) => h("th", { attrs: { scope: "col" } }, t)),
        ),
      ),
      h(
        "tbody",
        null,
        rows.map((r) =>
          h(
            "tr",
            null,
            r.map((c, i) => h("td", { attrs: { "data-label": head[i] ?? "" } }, c)),
          ),
        ),
      ),
    ),
  );
}

/**
 * A titled panel.
 * @param {string} title
 * @param {...Children} children
 */
export function panel(title, ...children) {
  return h("section", { cls: "panel" }, h("h2", null, title), ...children);
}

/**
 * A definition list of label → value (rows with an empty value are left out).
 * @param {[string, Children][]} rows
 */
export function facts(rows) {
  return h(
    "dl",
    { cls: "facts" },
    rows
      .filter(([, v]) => v !== undefined && v !== null && v !== "")
      .map(([k, v]) => [h("dt", null, k), h("dd", null, v)]),
  );
}

/**
 * Labels as chips.
 * @param {Record<string, string> | undefined} labels
 */
export function chips(labels) {
  const entries = Object.entries(labels ?? {}).sort(([a], [b]) => a.localeCompare(b));
  if (entries.length === 0) return null;
  return h(
    "ul",
    { cls: "chips", attrs: { "aria-label": "labels" } },
    entries.map(([k, v]) => h("li", null, v === "" ? k : `${k}=${v}`)),
  );
}

/**
 * A hash link inside the dashboard built from path segments (each one encoded).
 * @param {string[]} segments
 * @param {...Children} children
 */
export function link(segments, ...children) {
  return h("a", { href: `#/${segments.map(encodeURIComponent).join("/")}` }, ...children);
}

/**
 * A time as "5m" (ago) with the exact time as its tooltip.
 * @param {string | undefined} time RFC 3339
 * @param {number} now
 * @param {string} [suffix]
 */
export function ago(time, now, suffix = " ago") {
  if (!time) return h("span", { cls: "muted" }, "—");
  const ms = Date.parse(time);
  if (Number.isNaN(ms)) return h("span", null, time);
  return h(
    "time",
    { title: new Date(ms).toLocaleString(), attrs: { datetime: time } },
    `${duration(now - ms)}${suffix}`,
  );
}

/**
 * A duration the way kubectl prints ages: 45s, 12m, 3h, 2d.
 * @param {number} ms
 */
function duration(ms) {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400 * 2)
    return `${Math.floor(s / 3600)}h${s < 36000 && s % 3600 >= 60 ? `${Math.floor((s % 3600) / 60)}m` : ""}`;
  return `${Math.floor(s / 86400)}d`;
}

/**
 * Monospace text (ids, images, commands).
 * @param {string} text
 */
export function code(text) {
  return h("code", null, text);
}
