// The stream opener the agent starts with: the handlers of logs, exec and port-forward streams
// (the runtime's SPDY and WebSocket clients among them) are loaded with the first stream, since
// most devices rarely see one.
import type { OpenStream } from "../../streams/types.ts";
import type { StreamDeps } from "./handlers.ts";

export function lazyStreamOpener(deps: StreamDeps): OpenStream {
  let opener: OpenStream | undefined;
  return async (req, out, signal) => {
    opener ??= (await import("./handlers.ts")).createStreamOpener(deps);
    return opener(req, out, signal);
  };
}
