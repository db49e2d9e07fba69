// Image references, parsed with the grammar of the distribution reference library that the kubelet
// and containerd use: [domain[:port]/]path[:tag][@digest]. A reference without a domain is on
// docker.io (single names under library/); one without tag or digest gets the tag "latest".

/** An image reference split into its parts; `normalized` is containerd's full form. */
export interface ImageReference {
  /** Registry host (and port), e.g. "docker.io", "127.0.0.1:5000". */
  domain: string;
  /** Repository path inside the registry, e.g. "library/busybox". */
  path: string;
  /** "" when the reference has a digest but no tag. */
  tag: string;
  /** "" when absent. */
  digest: string;
  /** domain/path[:tag][@digest], with the default tag applied when neither is given. */
  normalized: string;
}

export class InvalidImageReferenceError extends Error {
  override readonly name = "InvalidImageReferenceError";
  constructor(
    readonly reference: string,
    readonly detail: string,
  ) {
    super(`couldn't parse image name ${JSON.stringify(reference)}: ${detail}`);
  }
}

const PATH_COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const DOMAIN_COMPONENT = /^(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])$/;
const TAG = /^[\w][\w.-]{0,127}$/;
const DIGEST = /^[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}$/;
const PORT = /^[0-9]+$/;
const MAX_NAME_LENGTH = 255;

function isDomain(text: string): boolean {
  if (text.startsWith("[")) return /^\[[0-9a-fA-F:.]+\](?::[0-9]+)?$/.test(text);
  const colon = text.lastIndexOf(":");
  const host = colon === -1 ? text : text.slice(0, colon);
  if (colon !== -1 && !PORT.test(text.slice(colon + 1))) return false;
  return host.split(".").every((part) => DOMAIN_COMPONENT.test(part));
}

/** Splits `name[:tag][@digest]`; throws on anything the reference grammar refuses. */
export function parseImageReference(reference: string): ImageReference {
  const fail = (detail: string): never => {
    throw new InvalidImageReferenceError(reference, detail);
  };
  if (reference === "" || /\s/.test(reference)) fail("invalid reference format");
  let rest = reference;
  let digest = "";
  const at = rest.indexOf("@");
  if (at !== -1) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
    if (!DIGEST.test(digest)) fail("invalid reference format");
  }
  let tag = "";
  const lastSlash = rest.lastIndexOf("/");
  const colon = rest.lastIndexOf(":");
  if (colon > lastSlash) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
    if (!TAG.test(tag)) fail("invalid reference format");
  }
  const slash = rest.indexOf("/");
  const first = slash === -1 ? "" : rest.slice(0, slash);
  const hasDomain =
    first !== "" && (first.includes(".") || first.includes(":") || first === "localhost");
  let domain = hasDomain ? first : "docker.io";
  let path = hasDomain ? rest.slice(slash + 1) : rest;
  if (hasDomain && !isDomain(domain)) fail("invalid reference format");
  if (domain === "index.docker.io") domain = "docker.io";
  if (domain === "docker.io" && !path.includes("/")) path = `library/${path}`;
  if (path.split("/").some((c) => !PATH_COMPONENT.test(c))) {
    fail(
      /[A-Z]/.test(path)
        ? "invalid reference format: repository name must be lowercase"
        : "invalid reference format",
    );
  }
  if (`${domain}/${path}`.length > MAX_NAME_LENGTH)
    fail("repository name must not be more than 255 characters");
  if (tag === "" && digest === "") tag = "latest";
  const normalized = `${domain}/${path}${tag ? `:${tag}` : ""}${digest ? `@${digest}` : ""}`;
  return { domain, path, tag, digest, normalized };
}
