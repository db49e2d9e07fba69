// The hub's release routes over real loopback HTTP (src/hub/releases/api.ts, range.ts): which
// range a Range header picks, the download's headers as a client sees them (206, 416, no
// Content-Encoding), who may download, and a push through PUT.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Server } from "bun";
import { StatusError } from "../../../src/api/status.ts";
import type { Identity } from "../../../src/hub/identity.ts";
import { handleReleases } from "../../../src/hub/releases/api.ts";
import { chooseRange } from "../../../src/hub/releases/range.ts";
import { ReleaseStore } from "../../../src/hub/releases/store.ts";
import { RELEASE_MANIFEST_HEADER } from "../../../src/protocol/index.ts";
import { serializeManifest } from "../../../src/release/manifest.ts";
import { createLogger } from "../../../src/util/log.ts";

describe("chooseRange()", () => {
  const cases: [string | null, ReturnType<typeof chooseRange>][] = [
    [null, undefined],
    ["bytes=0-", { start: 0, end: 999 }],
    ["bytes=100-", { start: 100, end: 999 }],
    ["bytes=100-199", { start: 100, end: 199 }],
    ["bytes=900-5000", { start: 900, end: 999 }],
    ["bytes=-10", { start: 990, end: 999 }],
    ["bytes=-5000", { start: 0, end: 999 }],
    ["bytes=999-", { start: 999, end: 999 }],
    ["bytes=1000-", "unsatisfiable"],
    ["bytes=-0", "unsatisfiable"],
    ["bytes=200-100", undefined],
    ["bytes=0-1,5-6", undefined],
    ["items=0-", undefined],
    ["bytes=-", undefined],
  ];
  for (const [header, want] of cases)
    test(`${JSON.stringify(header)} of 1000 bytes → ${JSON.stringify(want)}`, () => {
      expect(chooseRange(header, 1000)).toEqual(want);
    });
});

const dir = mkdtempSync(join(tmpdir(), "release-api-"));
const store = new ReleaseStore(join(dir, "releases"));
const exe = new Uint8Array(300_000).map((_, i) => ((i * 7) % 256) ^ (i >> 12));
const manifest = serializeManifest({
  version: "1.0.0",
  arch: "arm64",
  size: exe.length,
  sha256: createHash("sha256").update(exe).digest("hex"),
  signature: new Uint8Array(64),
});
const identity = {
  isOperator: (t: string | undefined) => t === "op",
  authenticate: (t: string | undefined) =>
    t === "node-cred"
      ? { ok: true, nodeName: "dev1" }
      : { ok: false, code: "unauthorized", reason: "unknown credential" },
} as unknown as Identity;
/** What the routes wrote to the audit log: "action release: outcome". */
const audited: string[] = [];
let server: Server<undefined>;
let base = "";

beforeAll(() => {
  const deps = {
    releases: store,
    identity,
    operatorOnly(req: Request) {
      if (req.headers.get("authorization") !== "Bearer op")
        throw new StatusError("Unauthorized", "operator only");
    },
    log: createLogger({ level: "error" }),
    audit: async (_req: Request, action: string, release: string, outcome: string) => {
      audited.push(`${action} ${release}: ${outcome}`);
    },
    stored: (version: string) => audited.push(`stored hook ${version}`),
  };
  server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: (req) =>
      handleReleases(deps, req, new URL(req.url)).catch((e: StatusError) => e.toResponse()),
  });
  base = `http://127.0.0.1:${server.port}/api/v1/releases`;
});
afterAll(() => {
  server.stop(true);
  rmSync(dir, { recursive: true, force: true });
});

const get = (path: string, token: string | undefined, range?: string) =>
  fetch(base + path, {
    headers: {
      ...(token !== undefined && { authorization: `Bearer ${token}` }),
      ...(range !== undefined && { range }),
      "accept-encoding": "gzip, identity",
    },
    decompress: false,
  } as RequestInit);

describe("the release routes", () => {
  test("PUT by the operator stores the release (201), again unchanged (200); a device may not push", async () => {
    const put = (token: string) =>
      fetch(`${base}/1.0.0/arm64`, {
        method: "PUT",
        headers: {
          authorization: `Bearer ${token}`,
          [RELEASE_MANIFEST_HEADER]: Buffer.from(manifest).toString("base64"),
        },
        body: exe,
      });
    expect((await put("node-cred")).status).toBe(401);
    const first = await put("op");
    expect(first.status).toBe(201);
    expect(((await first.json()) as { stored: boolean }).stored).toBe(true);
    expect((await put("op")).status).toBe(200);
    expect(audited).toEqual([
      "push 1.0.0/arm64: stored",
      "stored hook 1.0.0",
      "push 1.0.0/arm64: unchanged",
    ]);
  });

  test("a refused push is refused with its reason, and written to the audit log", async () => {
    audited.length = 0;
    const res = await fetch(`${base}/1.0.1/arm64`, {
      method: "PUT",
      headers: {
        authorization: "Bearer op",
        [RELEASE_MANIFEST_HEADER]: Buffer.from(manifest).toString("base64"),
      },
      body: exe,
    });
    expect(res.status).toBe(400);
    const message = "the manifest is of release 1.0.0/arm64, pushed as 1.0.1/arm64";
    expect(((await res.json()) as { message: string }).message).toBe(message);
    expect(audited).toEqual([`push 1.0.1/arm64: refused: ${message}`]);
  });

  test("GET of the release by a device: the gzip bytes whole, as stored, with no Content-Encoding", async () => {
    const stored = readFileSync(join(store.root, "1.0.0/arm64.gz"));
    const res = await get("/1.0.0/arm64", "node-cred");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/gzip");
    expect(res.headers.get("content-encoding")).toBeNull();
    expect(res.headers.get("accept-ranges")).toBe("bytes");
    expect(res.headers.get("content-length")).toBe(String(stored.length));
    expect(res.headers.get("x-fleetlet-release-size")).toBe(String(exe.length));
    expect(res.headers.get("x-fleetlet-release-sha256")).toBe(
      createHash("sha256").update(exe).digest("hex"),
    );
    expect(Buffer.compare(Buffer.from(await res.arrayBuffer()), stored)).toBe(0);
  });

  test("GET with Range: 206 with Content-Range and the bytes asked for; past the end 416", async () => {
    const stored = readFileSync(join(store.root, "1.0.0/arm64.gz"));
    const total = stored.length;
    const from = await get("/1.0.0/arm64", "op", "bytes=1000-");
    expect(from.status).toBe(206);
    expect(from.headers.get("content-range")).toBe(`bytes 1000-${total - 1}/${total}`);
    expect(from.headers.get("content-length")).toBe(String(total - 1000));
    expect(Buffer.compare(Buffer.from(await from.arrayBuffer()), stored.subarray(1000))).toBe(0);
    const mid = await get("/1.0.0/arm64", "op", "bytes=10-19");
    expect(mid.headers.get("content-range")).toBe(`bytes 10-19/${total}`);
    expect(Buffer.compare(Buffer.from(await mid.arrayBuffer()), stored.subarray(10, 20))).toBe(0);
    const past = await get("/1.0.0/arm64", "op", `bytes=${total}-`);
    expect(past.status).toBe(416);
    expect(past.headers.get("content-range")).toBe(`bytes */${total}`);
  });

  test("GET of the manifest gives the text pushed", async () => {
    const res = await get("/1.0.0/arm64/manifest", "node-cred");
    expect(res.status).toBe(200);
    expect(await res.text()).toBe(manifest);
  });

  test("no credential or a wrong one is refused 401; an unknown release is 404", async () => {
    expect((await get("/1.0.0/arm64", undefined)).status).toBe(401);
    expect((await get("/1.0.0/arm64", "flc_wrong")).status).toBe(401);
    expect((await get("/9.9.9/arm64", "node-cred")).status).toBe(404);
    expect((await get("/1.0.0/amd64", "node-cred")).status).toBe(404);
  });

  test("a device may not list or delete releases", async () => {
    expect((await get("", "node-cred")).status).toBe(401);
    const del = await fetch(`${base}/1.0.0`, {
      method: "DELETE",
      headers: { authorization: "Bearer node-cred" },
    });
    expect(del.status).toBe(401);
    const list = (await (await get("", "op")).json()) as { items: { version: string }[] };
    expect(list.items.map((r) => r.version)).toEqual(["1.0.0"]);
  });

  test("DELETE by the operator removes the release and writes it to the audit log", async () => {
    audited.length = 0;
    const del = await fetch(`${base}/1.0.0`, {
      method: "DELETE",
      headers: { authorization: "Bearer op" },
    });
    expect(await del.json()).toEqual({ deleted: ["1.0.0/arm64"] });
    expect(audited).toEqual(["delete 1.0.0: deleted 1.0.0/arm64"]);
    expect((await get("/1.0.0/arm64", "op")).status).toBe(404);
  });
});
