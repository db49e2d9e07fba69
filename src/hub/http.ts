// Reading request bodies for the hub's HTTP API: within a size limit, refusals as Status.
import { StatusError } from "../api/status.ts";

/** The request's body as text; BadRequest when it is over `maxBytes`. */
export async function readBody(req: Request, maxBytes: number): Promise<string> {
  const length = Number(req.headers.get("content-length") ?? 0);
  if (length > maxBytes)
    throw new StatusError("BadRequest", `request body over the limit of ${maxBytes} bytes`);
  const text = await req.text();
  if (Buffer.byteLength(text) > maxBytes)
    throw new StatusError("BadRequest", `request body over the limit of ${maxBytes} bytes`);
  return text;
}

/** The request's JSON body; BadRequest when it is over `maxBytes` or not JSON. */
export async function readJson(req: Request, maxBytes: number): Promise<unknown> {
  const text = await readBody(req, maxBytes);
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new StatusError("BadRequest", `request body is not JSON: ${(err as Error).message}`);
  }
}

/** A %-encoded segment of a request's path, decoded; BadRequest when its escapes are not UTF-8. */
export function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new StatusError(
      "BadRequest",
      `the path segment ${JSON.stringify(segment)} is not valid %-encoded UTF-8`,
    );
  }
}
