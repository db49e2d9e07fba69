// The httpGet probe handler, with kubelet's rules: success is a status in 200-399; redirects are
// followed (at most 10) only to the same host, and a redirect elsewhere ends the probe as a
// success with a warning; HTTPS certificates are not verified; the body is read only up to
// MAX_BODY bytes; no connection is reused. Every failure is an outcome with a message.

import type { HTTPGetAction } from "../../api/types.ts";
import { buildInfo } from "../../util/version.ts";
import { hookURL } from "../kuberuntime/index.ts";
import { errorText } from "./prober.ts";
import type { ProbeOutcome, ProbeTarget } from "./types.ts";

const MAX_BODY = 10 * 1024;
const MAX_REDIRECTS = 10;

function requestHeaders(h: HTTPGetAction): Headers {
  const headers = new Headers();
  for (const x of h.httpHeaders ?? []) headers.append(x.name, x.value);
  if (!headers.has("user-agent"))
    headers.set("user-agent", `fleetlet-probe/${buildInfo().version}`);
  if (!headers.has("accept")) headers.set("accept", "*/*");
  headers.set("connection", "close");
  return headers;
}

/** Reads at most MAX_BODY bytes of the body as text, then drops the rest. */
async function readCapped(res: Response): Promise<string> {
  const reader = res.body?.getReader();
  if (reader === undefined) return "";
  const chunks: Uint8Array[] = [];
  let size = 0;
  while (size < MAX_BODY) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    size += value.byteLength;
  }
  if (size >= MAX_BODY) await reader.cancel().catch(() => {});
  const all = new Uint8Array(Math.min(size, MAX_BODY));
  let at = 0;
  for (const c of chunks) {
    const part = c.subarray(0, Math.min(c.byteLength, all.byteLength - at));
    all.set(part, at);
    at += part.byteLength;
  }
  return new TextDecoder().decode(all);
}

function fetchError(url: string, err: unknown, timeoutMs: number, signal: AbortSignal): string {
  const e = err as { name?: string; code?: string };
  if (signal.aborted || e.name === "TimeoutError" || e.name === "AbortError") {
    return `Get ${JSON.stringify(url)}: no answer within ${timeoutMs / 1000}s (timeout)`;
  }
  const code = e.code && !errorText(err).includes(e.code) ? ` (${e.code})` : "";
  return `Get ${JSON.stringify(url)}: ${errorText(err)}${code}`;
}

export async function probeHTTP(
  h: HTTPGetAction,
  target: ProbeTarget,
  timeoutMs: number,
  outer: AbortSignal,
): Promise<ProbeOutcome> {
  let url = hookURL(h, target.container, target.host);
  const signal = AbortSignal.any([outer, AbortSignal.timeout(timeoutMs)]);
  const headers = requestHeaders(h);
  const host = new URL(url).hostname;
  try {
    for (let hop = 0; ; hop++) {
      const res = await fetch(url, {
        headers,
        signal,
        redirect: "manual",
        keepalive: false,
        tls: { rejectUnauthorized: false },
      } as RequestInit);
      const body = await readCapped(res);
      const location = res.headers.get("location");
      if (res.status >= 300 && res.status < 400 && location) {
        const next = new URL(location, url);
        if (next.hostname !== host) {
          return {
            result: "success",
            warning: true,
            output: `Probe terminated redirects, Response body: ${body}`,
          };
        }
        if (hop + 1 >= MAX_REDIRECTS) {
          return {
            result: "failure",
            output: `Get ${JSON.stringify(url)}: stopped after 10 redirects`,
          };
        }
        url = next.toString();
        continue;
      }
      if (res.status >= 200 && res.status < 400) return { result: "success", output: body };
      return { result: "failure", output: `HTTP probe failed with statuscode: ${res.status}` };
    }
  } catch (err) {
    return { result: "failure", output: fetchError(url, err, timeoutMs, signal) };
  }
}
