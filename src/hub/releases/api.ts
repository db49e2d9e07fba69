// The hub's release routes (docs/hub-releases.md):
//   GET    /api/v1/releases                          operator: every stored release
//   PUT    /api/v1/releases/<version>/<arch>         operator: push (body: the executable; the
//                                                    manifest in x-fleetlet-release-manifest)
//   DELETE /api/v1/releases/<version>[/<arch>]       operator
//   GET    /api/v1/releases/<version>/<arch>         a device or the operator: the gzip'd bytes
//   GET    /api/v1/releases/<version>/<arch>/manifest  a device or the operator: the manifest
import { json, StatusError } from "../../api/status.ts";
import { RELEASE_MANIFEST_HEADER, RELEASES_PATH } from "../../protocol/index.ts";
import type { Logger } from "../../util/log.ts";
import { decodeSegment } from "../http.ts";
import type { Identity } from "../identity.ts";
import { bearerToken } from "../tokens.ts";
import { serveRange } from "./range.ts";
import type { Releases } from "./store.ts";

export interface ReleaseApiDeps {
  releases: Releases;
  identity: Identity;
  /** Refuses a request without the operator token (api.ts operatorOnly). */
  operatorOnly(req: Request, url: URL): void;
  /** Writes a push or delete, by the operator's `req`, to the audit log with its outcome. */
  audit(req: Request, action: "push" | "delete", release: string, outcome: string): Promise<void>;
  /** Release `version` was stored (the nodes that want it are offered it). */
  stored?(version: string): void;
  log: Logger;
}

/** Whether `path` is one of the release routes. */
export function isReleasePath(path: string): boolean {
  return path === RELEASES_PATH || path.startsWith(`${RELEASES_PATH}/`);
}

/** Refuses a request that carries neither the operator token nor a valid device credential. */
function deviceOrOperator(deps: ReleaseApiDeps, req: Request): string {
  const token = bearerToken(req.headers.get("authorization"));
  if (deps.identity.isOperator(token)) return "operator";
  const device = deps.identity.authenticate(token);
  if (device.ok) return `node ${device.nodeName}`;
  throw new StatusError(
    "Unauthorized",
    "a node credential or the operator token is required to download a release (Authorization: Bearer)",
  );
}

/** Handles a release route; the caller has checked isReleasePath. */
export async function handleReleases(
  deps: ReleaseApiDeps,
  req: Request,
  url: URL,
): Promise<Response> {
  const path = url.pathname.replace(/\/+$/, "");
  const parts = path
    .slice(RELEASES_PATH.length)
    .split("/")
    .filter((p) => p !== "")
    .map(decodeSegment);
  const [version, arch, sub, ...extra] = parts;
  if (req.method === "GET" && (sub === undefined || sub === "manifest") && arch !== undefined) {
    deviceOrOperator(deps, req);
    return download(deps, req, version ?? "", arch, sub === "manifest");
  }
  deps.operatorOnly(req, url);
  if (extra.length > 0 || sub !== undefined)
    throw new StatusError("NotFound", `the hub serves no ${req.method} ${path}`);
  if (req.method === "GET" && version === undefined)
    return json({
      apiVersion: "fleetlet.io/v1",
      kind: "ReleaseList",
      items: await deps.releases.list(),
    });
  if (req.method === "PUT" && version !== undefined && arch !== undefined)
    return push(deps, req, version, arch);
  if (req.method === "DELETE" && version !== undefined) return remove(deps, req, version, arch);
  throw new StatusError("MethodNotAllowed", `${req.method} ${path} is not allowed`);
}

async function remove(
  deps: ReleaseApiDeps,
  req: Request,
  version: string,
  arch: string | undefined,
): Promise<Response> {
  const name = `${version}${arch === undefined ? "" : `/${arch}`}`;
  const removed = await deps.releases.delete(version, arch);
  if (removed.length === 0) throw new StatusError("NotFound", `release ${name} not found`);
  deps.log.info("releases deleted", { releases: removed.join(",") });
  await deps.audit(req, "delete", name, `deleted ${removed.join(", ")}`);
  return json({ deleted: removed });
}

/** A push, written to the audit log whether it is stored, unchanged or refused. */
async function push(
  deps: ReleaseApiDeps,
  req: Request,
  version: string,
  arch: string,
): Promise<Response> {
  try {
    const res = await store(deps, req, version, arch);
    await deps.audit(
      req,
      "push",
      `${version}/${arch}`,
      res.status === 201 ? "stored" : "unchanged",
    );
    if (res.status === 201) deps.stored?.(version);
    return res;
  } catch (err) {
    await deps.audit(req, "push", `${version}/${arch}`, `refused: ${(err as Error).message}`);
    throw err;
  }
}

async function store(
  deps: ReleaseApiDeps,
  req: Request,
  version: string,
  arch: string,
): Promise<Response> {
  const encoded = req.headers.get(RELEASE_MANIFEST_HEADER);
  if (encoded === null)
    throw new StatusError("BadRequest", `a push needs the manifest in ${RELEASE_MANIFEST_HEADER}`);
  const manifest = Buffer.from(encoded, "base64").toString("utf8");
  const length = Number(req.headers.get("content-length") ?? 0);
  const max = deps.releases.maxBytes;
  if (length > max)
    throw new StatusError(
      "RequestEntityTooLarge",
      `the upload is ${length} bytes, over the hub's limit of ${max} bytes for a release`,
    );
  if (req.body === null)
    throw new StatusError("BadRequest", "a push needs the executable as its body");
  const out = await deps.releases.push(version, arch, manifest, req);
  deps.log.info(out.stored ? "release stored" : "release pushed again, unchanged", {
    release: `${version}/${arch}`,
    size: out.info.size,
    compressed: out.info.compressedSize,
    sha256: out.info.sha256,
  });
  return json({ stored: out.stored, release: out.info }, out.stored ? 201 : 200);
}

async function download(
  deps: ReleaseApiDeps,
  req: Request,
  version: string,
  arch: string,
  manifestOnly: boolean,
): Promise<Response> {
  const r = await deps.releases.get(version, arch);
  if (r === undefined) throw new StatusError("NotFound", `release ${version}/${arch} not found`);
  if (manifestOnly)
    return new Response(r.manifest, { headers: { "content-type": "text/plain; charset=utf-8" } });
  // The gzip file as it is: no Content-Encoding, so ranges are of the stored bytes.
  const headers = {
    "content-type": "application/gzip",
    "x-fleetlet-release-sha256": r.sha256,
    "x-fleetlet-release-size": String(r.size),
  };
  return serveRange(r.compressedSize, req.headers.get("range"), headers, (start, end) =>
    deps.releases.read(r, start, end),
  );
}
