// The agent's hub URLs (hub.url, --hub): the replicas of one hub, which share its store and its CA
// (docs/hub-replicas.md). One URL, a comma-separated list of them, or in the file a YAML list.
// Entries are trimmed; an empty entry, a scheme other than ws, wss, http or https, and one hub
// named twice ("https://hub:7443" and "wss://hub:7443/" are one hub) are refused.

const SCHEMES = ["ws:", "wss:", "http:", "https:"];

/** A hub URL's transport and address, the parts that say which hub it is. */
export function hubAddress(url: string): { secure: boolean; base: string } {
  const u = new URL(url);
  return {
    secure: u.protocol === "https:" || u.protocol === "wss:",
    base: `${u.host}${u.pathname.replace(/\/+$/, "")}`,
  };
}

/** The entries of hub.url: a string split at its commas, a list as it is; each one trimmed. */
export function hubUrlEntries(value: string | readonly string[]): string[] {
  const parts = typeof value === "string" ? value.split(",") : [...value];
  return parts.map((p) => p.trim());
}

function schemeOk(url: string): boolean {
  try {
    return SCHEMES.includes(new URL(url).protocol);
  } catch {
    return false;
  }
}

/** Why these hub.url entries cannot be used, phrased to follow the value; undefined when they can. */
export function hubUrlsProblem(entries: readonly string[]): string | undefined {
  if (entries.every((e) => e === "")) return "must name a hub URL";
  const seen = new Map<string, string>();
  for (const [i, entry] of entries.entries()) {
    if (entry === "") return `has an empty entry (entry ${i + 1} of ${entries.length})`;
    if (!schemeOk(entry))
      return entries.length === 1
        ? "must be a ws://, wss://, http:// or https:// URL"
        : `has an entry ${JSON.stringify(entry)} that is not a ws://, wss://, http:// or https:// URL`;
    const { secure, base } = hubAddress(entry);
    const key = `${secure}/${base}`;
    const first = seen.get(key);
    if (first !== undefined)
      return `names one hub twice: ${JSON.stringify(first)} and ${JSON.stringify(entry)}`;
    seen.set(key, entry);
  }
  return undefined;
}
