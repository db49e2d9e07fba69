// Serving a stored file with HTTP ranges (RFC 9110, section 14): one range of a Range header
// `bytes=N-`, `bytes=N-M` or `bytes=-S`, answered 206 with Content-Range; a range past the end
// 416; a header that is not one such range is ignored (200, the whole file), as the RFC allows.
// The body is read as it is sent (a slice of a file, sent by Bun from disk, or a stream): never
// read whole into memory.

/** Which bytes to send: a range [start, end] (inclusive), or none can be (past the end). */
export type RangeChoice = { start: number; end: number } | "unsatisfiable" | undefined;

/** The single range `header` asks for in a file of `total` bytes (undefined: the whole file). */
export function chooseRange(header: string | null, total: number): RangeChoice {
  const m = /^bytes=(\d*)-(\d*)$/.exec(header?.trim() ?? "");
  if (m === null) return undefined;
  const [first, last] = [m[1] ?? "", m[2] ?? ""];
  if (first === "" && last === "") return undefined;
  if (first === "") {
    // A suffix: the last S bytes.
    const n = Number(last);
    if (n === 0) return "unsatisfiable";
    return { start: Math.max(0, total - n), end: total - 1 };
  }
  const start = Number(first);
  if (last !== "" && Number(last) < start) return undefined;
  if (start >= total) return "unsatisfiable";
  return { start, end: last === "" ? total - 1 : Math.min(Number(last), total - 1) };
}

/**
 * The answer to a GET of stored bytes (`total` of them, bytes [start, end] read by `read`) with
 * the Range header `range`: 200 or 206 with Content-Length and Accept-Ranges, or 416; `headers`
 * are added to each.
 */
export function serveRange(
  total: number,
  range: string | null,
  headers: Record<string, string>,
  read: (start: number, end: number) => Blob | ReadableStream<Uint8Array>,
): Response {
  const h = new Headers(headers);
  h.set("accept-ranges", "bytes");
  const choice = chooseRange(range, total);
  if (choice === "unsatisfiable") {
    h.set("content-range", `bytes */${total}`);
    return new Response(null, { status: 416, headers: h });
  }
  const { start, end } = choice ?? { start: 0, end: total - 1 };
  h.set("content-length", String(end - start + 1));
  if (choice !== undefined) h.set("content-range", `bytes ${start}-${end}/${total}`);
  return new Response(read(start, end), { status: choice === undefined ? 200 : 206, headers: h });
}
