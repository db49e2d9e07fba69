// Watches of a running hub, as a user's clients open them: the operator's watch stream
// (GET /api/v1/watch, a WebSocket: the dashboard's) and a Kubernetes API watch (?watch=1, one
// JSON event per line: kubectl -w's). Each keeps what arrived with when (Date.now()).
import type { TestHub } from "./hub.ts";
import { eventually } from "./testbed.ts";

export interface WatchEvent {
  type: string;
  object: {
    kind?: string;
    code?: number;
    metadata: { name: string; resourceVersion?: string; annotations?: Record<string, string> };
  };
  at: number;
}

/** The events of one watch, and how to wait for one. */
export class Watched {
  readonly events: WatchEvent[] = [];

  constructor(readonly close: () => void) {}

  /** The first event (after `from`) that `match` accepts, waited for up to `timeoutMs`. */
  waitFor(
    what: string,
    match: (e: WatchEvent) => boolean,
    timeoutMs = 20_000,
    from = 0,
  ): Promise<WatchEvent> {
    return eventually(what, () => this.events.slice(from).find(match), timeoutMs, 20);
  }
}

/** The operator's watch stream of `kinds`, without the initial objects. */
export async function operatorWatch(hub: TestHub, kinds: string): Promise<Watched> {
  const url = `${hub.url.replace("http", "ws")}/api/v1/watch?kinds=${kinds}&initial=false&token=${hub.operatorToken}`;
  const ws = new WebSocket(url, { tls: { ca: hub.caPem } } as unknown as string[]);
  const w = new Watched(() => ws.close());
  ws.onmessage = (e) => w.events.push({ ...JSON.parse(String(e.data)), at: Date.now() });
  await new Promise((resolve, reject) => {
    ws.onopen = resolve;
    ws.onerror = reject;
  });
  return w;
}

/** A Kubernetes API watch of `path` (e.g. "/api/v1/pods?resourceVersion=12"). */
export async function kubeWatch(hub: TestHub, path: string): Promise<Watched> {
  const abort = new AbortController();
  const sep = path.includes("?") ? "&" : "?";
  const res = await hub.api(`${path}${sep}watch=1`, { signal: abort.signal });
  if (res.status !== 200) throw new Error(`watch ${path}: ${res.status} ${await res.text()}`);
  const w = new Watched(() => abort.abort());
  void (async () => {
    const decoder = new TextDecoder();
    let buffered = "";
    try {
      for await (const chunk of res.body as ReadableStream<Uint8Array>) {
        buffered += decoder.decode(chunk, { stream: true });
        for (let nl = buffered.indexOf("\n"); nl >= 0; nl = buffered.indexOf("\n")) {
          const line = buffered.slice(0, nl).trim();
          buffered = buffered.slice(nl + 1);
          if (line !== "") w.events.push({ ...JSON.parse(line), at: Date.now() });
        }
      }
    } catch {
      // closed
    }
  })();
  return w;
}

/** The resourceVersion of a Kubernetes list at `hub`, and its items. */
export async function kubeList(
  hub: TestHub,
  path: string,
): Promise<{ rv: string; items: WatchEvent["object"][] }> {
  const res = await hub.api(path);
  if (res.status !== 200) throw new Error(`list ${path}: ${res.status} ${await res.text()}`);
  const body = (await res.json()) as {
    metadata: { resourceVersion: string };
    items: WatchEvent["object"][];
  };
  return { rv: body.metadata.resourceVersion, items: body.items };
}
