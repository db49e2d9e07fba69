// Reading request bodies for the hub's HTTP API: JSON, within a size limit, refusals as Status.
import { StatusError } from "../api/status.ts";

/** The request's JSON body; BadRequest when it is over `maxBytes` or not JSON. */
export async function readJson(req: Request, maxBytes: number): Promise<unknown> {
  const text = await req.text();
  if (Buffer.byteLength(text) > maxBytes)
    throw new StatusError("BadRequest", `request body over the limit of ${maxBytes} bytes`);
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new StatusError("BadRequest", `request body is not JSON: ${(err as Error).message}`);
  }
}
