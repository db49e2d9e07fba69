// A log stream as an HTTP response (`kubectl logs`, `fleetlet logs --hub`): opened before the
// answer, so a refusal is a Status with its code; then the device's output as the body, taken
// as the client reads it (credit goes back to the device only then). A follow ends when the
// client leaves; a device that goes offline mid-stream breaks the body with the reason.
import type { StreamOpen } from "../../protocol/streams.ts";
import { type OpenStream, StreamFailure } from "../../streams/types.ts";
import { failureResponse } from "./pod-deps.ts";

/** Bytes the body may hold before the device's writes wait for the client. */
const HIGH_WATER = 64 * 1024;

export async function logStreamResponse(
  open: OpenStream,
  req: StreamOpen,
  clientGone: AbortSignal,
): Promise<Response> {
  const abort = new AbortController();
  const onGone = () => abort.abort(new Error("the client left"));
  clientGone.addEventListener("abort", onGone, { once: true });
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  let pulled: (() => void)[] = [];
  let ended = false;
  const body = new ReadableStream<Uint8Array>(
    {
      start(c) {
        controller = c;
      },
      pull() {
        for (const p of pulled.splice(0)) p();
      },
      cancel() {
        ended = true;
        abort.abort(new Error("the client left"));
        for (const p of pulled.splice(0)) p();
      },
    },
    new ByteLengthQueuingStrategy({ highWaterMark: HIGH_WATER }),
  );
  pulled = [];
  try {
    await open(
      req,
      {
        write(_channel, data) {
          if (ended) return Promise.resolve();
          controller.enqueue(data);
          if ((controller.desiredSize ?? 1) > 0) return Promise.resolve();
          return new Promise((resolve) => pulled.push(resolve));
        },
        end(result) {
          if (ended) return;
          ended = true;
          clientGone.removeEventListener("abort", onGone);
          if (result.error === undefined) controller.close();
          else controller.error(new Error(result.error.message));
        },
      },
      abort.signal,
    );
  } catch (err) {
    clientGone.removeEventListener("abort", onGone);
    ended = true;
    if (err instanceof StreamFailure) return failureResponse(err);
    throw err;
  }
  return new Response(body, { headers: { "content-type": "text/plain; charset=utf-8" } });
}
