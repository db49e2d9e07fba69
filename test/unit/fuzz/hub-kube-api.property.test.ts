// Properties of the hub's Kubernetes API under near-valid and hostile requests, against a real hub
// in this process: every answer is a success or a v1 Status with a 4xx code and a message (never
// a 5xx, never a crash); a watch streams JSON events; no request pollutes Object.prototype; what
// a write answered is what a later GET returns (a delete: NotFound); the canary objects no
// request names stay as they were, and the other agent keeps being served.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { fuzz, fuzzTimeout } from "../../lib/fuzz.ts";
import {
  canaryState,
  type InProcessHub,
  otherAgentServed,
  startInProcessHub,
} from "./hub-in-process.ts";
import { type KubeRequest, kubeRequest, validObjects } from "./hub-kube-requests.ts";

let h: InProcessHub;
let canaries: unknown[];
beforeAll(async () => {
  h = await startInProcessHub();
  canaries = await canaryState(h);
  for (const [at, r] of [
    ["/api/v1/namespaces/default/configmaps", "configmaps"],
    ["/api/v1/namespaces/default/secrets", "secrets"],
    ["/apis/apps/v1/namespaces/default/daemonsets", "daemonsets"],
  ] as const) {
    const res = await h.api(at, { method: "POST", body: JSON.stringify(validObjects[r]) });
    expect(res.status).toBe(201);
  }
});
afterAll(() => h.stop());

/** The first events of a watch (what it had at once), then the watch is left. */
async function firstEvents(res: Response, abort: AbortController): Promise<string> {
  const reader = res.body?.getReader();
  if (reader === undefined) return "";
  let timer: ReturnType<typeof setTimeout> | undefined;
  const idle = new Promise<undefined>((r) => {
    timer = setTimeout(() => r(undefined), 20);
  });
  const chunk = await Promise.race([reader.read(), idle]);
  clearTimeout(timer);
  abort.abort();
  await reader.cancel().catch(() => {});
  const v = chunk?.value as Uint8Array | string | undefined;
  return typeof v === "string" ? v : new TextDecoder().decode(v ?? new Uint8Array());
}

/** A device's pod streams answer 503 when its agent cannot stream (the device's state, not a
 * failure of the hub); nothing else answers 5xx. */
const POD_STREAM = /\/pods\/[^/]+\/(log|exec|portforward)$/;

function checkStatus(res: Response, text: string, path: string): void {
  if (res.status === 503 && POD_STREAM.test(path)) expect(text).toMatch(/cannot stream|is offline/);
  else expect(res.status).toBeLessThan(500);
  if (res.status < 400) return;
  const s = JSON.parse(text) as { kind?: string; status?: string; code?: number; message?: string };
  expect(s).toMatchObject({ kind: "Status", status: "Failure", code: res.status });
  expect(typeof s.message === "string" && s.message.length > 0).toBe(true);
}

interface Written {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; namespace?: string; labels?: unknown };
  data?: unknown;
  spec?: unknown;
}

/** Where the object a write answered is read back. */
function objectPath(o: Written) {
  const plural: Record<string, string> = {
    ConfigMap: "configmaps",
    Secret: "secrets",
    DaemonSet: "daemonsets",
  };
  const r = plural[o.kind ?? ""];
  if (r === undefined || o.metadata?.name === undefined) return undefined;
  const base = o.apiVersion === "v1" ? "/api/v1" : `/apis/${o.apiVersion}`;
  return `${base}/namespaces/${o.metadata.namespace ?? "default"}/${r}/${encodeURIComponent(o.metadata.name)}`;
}

/** A later GET returns what a successful write answered (a delete: NotFound). */
async function checkStored(r: KubeRequest, text: string): Promise<void> {
  if (!["POST", "PUT", "PATCH", "DELETE"].includes(r.method) || r.query.includes("dryRun=All"))
    return;
  const o = JSON.parse(text) as Written;
  const at = objectPath(o);
  if (at === undefined) return;
  const got = await h.api(at);
  if (r.method === "DELETE") {
    expect(got.status).toBe(404);
    return;
  }
  expect(got.status).toBe(200);
  const stored = (await got.json()) as Written;
  expect({ data: stored.data, spec: stored.spec, labels: stored.metadata?.labels }).toEqual({
    data: o.data,
    spec: o.spec,
    labels: o.metadata?.labels,
  });
}

async function send(r: KubeRequest): Promise<void> {
  const abort = new AbortController();
  const headers: Record<string, string> = {};
  if (r.contentType !== undefined) headers["content-type"] = r.contentType;
  if (r.accept !== undefined) headers.accept = r.accept;
  const res = await h.api(`${r.path}${r.query === "" ? "" : `?${r.query}`}`, {
    method: r.method,
    headers,
    ...(r.body !== undefined && !["GET", "HEAD"].includes(r.method) && { body: r.body }),
    signal: abort.signal,
  });
  const watching =
    r.method === "GET" &&
    ["true", "1"].includes(new URLSearchParams(r.query).get("watch") ?? "") &&
    res.status === 200 &&
    (res.headers.get("content-type") ?? "").includes("json");
  if (watching) {
    const lines = (await firstEvents(res, abort)).split("\n").slice(0, -1);
    for (const line of lines.filter((l) => l !== "")) {
      // A GET of one object ignores ?watch= and answers the object (a Secret has a type).
      const e = JSON.parse(line) as { type?: string; kind?: string };
      if (e.kind !== undefined) expect(e.kind).not.toBe("");
      else expect(["ADDED", "MODIFIED", "DELETED", "ERROR"]).toContain(e.type ?? "");
    }
    return;
  }
  const text = await res.text();
  if (r.method === "HEAD") {
    expect(res.status === 503 ? POD_STREAM.test(r.path) : res.status < 500).toBe(true);
    return;
  }
  checkStatus(res, text, r.path);
  if (res.status < 300 && (res.headers.get("content-type") ?? "").includes("json"))
    await checkStored(r, text);
}

describe("the hub's Kubernetes API under near-valid and hostile requests", () => {
  test(
    "answers a success or a 4xx Status, stores what it answered, and keeps serving others",
    async () => {
      await fuzz(
        "hub-kube-api requests",
        kubeRequest,
        async (r) => {
          await send(r);
          expect(Object.keys(Object.prototype)).toEqual([]);
          expect(await canaryState(h)).toEqual(canaries);
        },
        { seed: 30_811, runs: 200 },
      );
      await otherAgentServed(h);
    },
    fuzzTimeout(600_000),
  );
});
