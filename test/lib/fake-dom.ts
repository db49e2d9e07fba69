// A small DOM for unit tests of the dashboard's views (src/hub/dashboard/*-view.js): what dom.js's
// h() uses (createElement, className, id, title, hidden, href, attributes, append) and enough of
// querySelectorAll to find what the views draw: compound selectors of a tag, #id, .class and
// [attr] / [attr=value], joined by descendant spaces. Install it on globalThis before a view
// draws (installFakeDom()); the browser e2e tests check the real page.

type Child = FakeElement | string;

export class FakeElement {
  readonly attributes = new Map<string, string>();
  readonly children: Child[] = [];
  parent: FakeElement | undefined;
  hidden = false;
  readonly listeners = new Map<string, unknown[]>();

  constructor(readonly tagName: string) {}

  get className(): string {
    return this.attributes.get("class") ?? "";
  }
  set className(v: string) {
    this.attributes.set("class", v);
  }
  get id(): string {
    return this.attributes.get("id") ?? "";
  }
  set id(v: string) {
    this.attributes.set("id", v);
  }
  set title(v: string) {
    this.attributes.set("title", v);
  }
  get title(): string {
    return this.attributes.get("title") ?? "";
  }

  setAttribute(name: string, value: string): void {
    this.attributes.set(name, String(value));
  }
  getAttribute(name: string): string | null {
    return this.attributes.get(name) ?? null;
  }
  addEventListener(type: string, f: unknown): void {
    this.listeners.set(type, [...(this.listeners.get(type) ?? []), f]);
  }

  append(...nodes: Child[]): void {
    for (const n of nodes) {
      if (n instanceof FakeElement) n.parent = this;
      this.children.push(n);
    }
  }
  replaceChildren(...nodes: Child[]): void {
    this.children.length = 0;
    this.append(...nodes);
  }

  get textContent(): string {
    return this.children.map((c) => (typeof c === "string" ? c : c.textContent)).join("");
  }

  /** Every element below this one, in document order. */
  *descendants(): Generator<FakeElement> {
    for (const c of this.children)
      if (c instanceof FakeElement) {
        yield c;
        yield* c.descendants();
      }
  }

  querySelectorAll(selector: string): FakeElement[] {
    const parts = selector.trim().split(/\s+(?![^[]*\])/);
    return [...this.descendants()].filter((el) => matchesPath(el, parts, this));
  }
  querySelector(selector: string): FakeElement | null {
    return this.querySelectorAll(selector)[0] ?? null;
  }
}

class FakeAnchor extends FakeElement {
  set href(v: string) {
    this.attributes.set("href", v);
  }
  get href(): string {
    return this.attributes.get("href") ?? "";
  }
}

/** Whether `el` matches the last compound of `parts` with the others matched by ancestors
 * (below `root`), in order. */
function matchesPath(el: FakeElement, parts: string[], root: FakeElement): boolean {
  const last = parts.at(-1);
  if (last === undefined || !matchesCompound(el, last)) return false;
  const rest = parts.slice(0, -1);
  if (rest.length === 0) return true;
  for (let a = el.parent; a !== undefined && a !== root; a = a.parent)
    if (matchesPath(a, rest, root)) return true;
  return false;
}

function matchesCompound(el: FakeElement, compound: string): boolean {
  const tokens = compound.match(/[#.][\w-]+|\[[^\]]+\]|^[\w-]+/g) ?? [];
  if (tokens.join("") !== compound) throw new Error(`the fake DOM cannot read "${compound}"`);
  return tokens.every((t) => {
    if (t.startsWith("#")) return el.id === t.slice(1);
    if (t.startsWith(".")) return el.className.split(/\s+/).includes(t.slice(1));
    if (t.startsWith("[")) {
      const [name = "", value] = t.slice(1, -1).split("=");
      const v = el.getAttribute(name);
      return value === undefined ? v !== null : v === value.replace(/^"|"$/g, "");
    }
    return el.tagName === t;
  });
}

/** Puts `document` and `HTMLAnchorElement` on globalThis for the views to draw with; returns
 * what takes them away again. */
export function installFakeDom(): () => void {
  const g = globalThis as Record<string, unknown>;
  const before = { document: g.document, HTMLAnchorElement: g.HTMLAnchorElement };
  Object.assign(g, {
    document: {
      createElement: (tag: string) => (tag === "a" ? new FakeAnchor(tag) : new FakeElement(tag)),
    },
    HTMLAnchorElement: FakeAnchor,
  });
  return () => Object.assign(g, before);
}

/** The text of each cell of each body row of `table`. */
export function cellTexts(table: FakeElement): string[][] {
  return table
    .querySelectorAll("tbody tr")
    .map((tr) => tr.children.filter((c) => c instanceof FakeElement).map((td) => td.textContent));
}
