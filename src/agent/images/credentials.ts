// Registry credentials from a docker config.json ({"auths": {"<registry>": {"auth": "<base64
// user:password>"} | {"username", "password"}}}), matched to an image by registry host and, when
// a key names a path ("host/team"), by the longest matching repository prefix.

import { readFile } from "node:fs/promises";
import type { AuthConfig } from "../../cri/index.ts";
import type { ImageReference } from "./reference.ts";

interface DockerAuthEntry {
  auth?: string;
  username?: string;
  password?: string;
  identitytoken?: string;
  registrytoken?: string;
}

/** One usable credential, keyed by "host[/path]" without scheme. */
export interface RegistryCredential {
  key: string;
  auth: AuthConfig;
}

const DOCKER_HUB_ALIASES = new Set(["docker.io", "index.docker.io", "registry-1.docker.io"]);

/** "https://index.docker.io/v1/" → "docker.io"; "http://host:5000/team/" → "host:5000/team". */
function normalizeRegistryKey(key: string): string {
  let k = key
    .trim()
    .replace(/^[a-z]+:\/\//i, "")
    .replace(/\/+$/, "");
  if (k.endsWith("/v1") || k.endsWith("/v2")) k = k.slice(0, -3);
  const slash = k.indexOf("/");
  const host = (slash === -1 ? k : k.slice(0, slash)).toLowerCase();
  const path = slash === -1 ? "" : k.slice(slash);
  return `${DOCKER_HUB_ALIASES.has(host) ? "docker.io" : host}${path}`;
}

// No serverAddress is sent: containerd's CRI treats a non-empty one as a URL whose host must
// equal the host it is talking to, so "127.0.0.1:5000" fails the pull ("first path segment in
// URL cannot contain colon") and "docker.io" or a mirror's host silently drops the credential.
// The image reference already chose the credential.
function toAuthConfig(entry: DockerAuthEntry): AuthConfig | undefined {
  const auth: AuthConfig = {};
  if (entry.username !== undefined || entry.password !== undefined) {
    auth.username = entry.username ?? "";
    auth.password = entry.password ?? "";
  } else if (entry.auth) {
    const decoded = Buffer.from(entry.auth, "base64").toString("utf8");
    const colon = decoded.indexOf(":");
    if (colon === -1) return undefined;
    auth.username = decoded.slice(0, colon);
    auth.password = decoded.slice(colon + 1);
    auth.auth = entry.auth;
  }
  if (entry.identitytoken) auth.identityToken = entry.identitytoken;
  if (entry.registrytoken) auth.registryToken = entry.registrytoken;
  return auth.username !== undefined || auth.identityToken || auth.registryToken ? auth : undefined;
}

/** Credentials of a parsed docker config.json; entries without usable credentials are skipped. */
export function parseDockerConfig(text: string, source = "docker config"): RegistryCredential[] {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new Error(`Cannot parse registry credentials ${source}: ${(err as Error).message}`);
  }
  const auths = (doc as { auths?: unknown } | null)?.auths;
  if (typeof auths !== "object" || auths === null) return [];
  const out: RegistryCredential[] = [];
  for (const [rawKey, entry] of Object.entries(auths as Record<string, DockerAuthEntry>)) {
    if (typeof entry !== "object" || entry === null) continue;
    const key = normalizeRegistryKey(rawKey);
    const auth = toAuthConfig(entry);
    if (auth) out.push({ key, auth });
  }
  return out;
}

/** The credential whose key is the longest prefix of the image's "domain/path", if any. */
export function findCredential(
  creds: readonly RegistryCredential[],
  ref: ImageReference,
): AuthConfig | undefined {
  const full = `${ref.domain}/${ref.path}`;
  let best: RegistryCredential | undefined;
  for (const c of creds) {
    const matches = full === c.key || full.startsWith(`${c.key}/`);
    if (matches && (best === undefined || c.key.length > best.key.length)) best = c;
  }
  return best?.auth;
}

/** Reads the credentials file; a missing file means no credentials. */
export async function loadDockerConfig(path: string): Promise<RegistryCredential[]> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw new Error(`Cannot read registry credentials ${path}: ${(err as Error).message}`);
  }
  return parseDockerConfig(text, path);
}
