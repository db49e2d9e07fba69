// The HTTP side of a resumable download: ask for the bytes from where the part file ends, and
// say from where the answer really starts (a server may ignore the Range and send everything).
import { DownloadError } from "./errors.ts";

export interface RangeAnswer {
  res: Response;
  /** The offset in the resource of the answer's first byte: the part's length, or 0. */
  start: number;
  /** The resource's length, when the answer says it. */
  total: number | undefined;
}

type Fetch = (url: string, init: RequestInit) => Promise<Response>;

/** "bytes 100-199/1000" → [100, 1000] (total undefined for "*"). */
export function parseContentRange(value: string | null): [number, number | undefined] | undefined {
  const m = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(value?.trim() ?? "");
  if (m === null) return undefined;
  return [Number(m[1]), m[3] === "*" ? undefined : Number(m[3])];
}

function lengthOf(res: Response): number | undefined {
  const v = res.headers.get("content-length");
  return v !== null && /^\d+$/.test(v) ? Number(v) : undefined;
}

async function get(
  fetchFn: Fetch,
  url: string,
  headers: Record<string, string> | undefined,
  start: number,
  signal?: AbortSignal,
) {
  const h = new Headers(headers);
  // The release is a gzip file whose bytes are fetched as they are: ask for no content coding,
  // and (Bun's `decompress: false`) never inflate them here even when a server labels them
  // Content-Encoding: gzip, which would also make ranges of them meaningless.
  h.set("accept-encoding", "identity");
  if (start > 0) h.set("range", `bytes=${start}-`);
  return fetchFn(url, { headers: h, signal, decompress: false } as RequestInit);
}

/**
 * GETs `url` from `start` (the part's length). A 206 from `start` resumes; a 200 starts over;
 * a 416 or a 206 from elsewhere is asked again from 0. `restart()` is called before starting
 * over, to empty the part. Throws DownloadError("http") for any other answer.
 */
export async function openRange(
  fetchFn: Fetch,
  url: string,
  headers: Record<string, string> | undefined,
  start: number,
  restart: () => Promise<void>,
  signal?: AbortSignal,
): Promise<RangeAnswer> {
  let from = start;
  for (;;) {
    const res = await get(fetchFn, url, headers, from, signal);
    if (res.status === 200) {
      const len = lengthOf(res);
      if (from > 0) await restart();
      return { res, start: 0, total: len };
    }
    const range =
      res.status === 206 ? parseContentRange(res.headers.get("content-range")) : undefined;
    if (range !== undefined && range[0] === from) return { res, start: from, total: range[1] };
    await res.body?.cancel();
    if (from === 0 || (res.status !== 206 && res.status !== 416)) {
      throw new DownloadError(
        "http",
        `GET ${url}: the server answered ${res.status} ${res.statusText}`.trim(),
      );
    }
    await restart();
    from = 0;
  }
}
