// A small tar reader for image archives held in memory: ustar and GNU headers, PAX extended
// headers (path, size), GNU long names, regular files and symbolic links (docker save links a
// repeated layer to its first copy). Nothing is written to disk: entries are views into the
// archive's bytes, so a hostile name can only fail the lookup, and every name is checked anyway.
//
// Invariants:
// - Every size is checked against the bytes left before anything is sliced: a truncated
//   archive or a size past the end is a TarError, never a short entry.
// - At most `maxEntries` entries and `maxHeaderBytes` of extended header are read.
// - Names are relative, "/"-separated, without "." or ".." parts; one that is not is refused.
// - Error messages show values from the archive shortened (shown()).

const BLOCK = 512;

/** A value from an archive as an error message shows it: quoted, at most 100 characters. */
export function shown(value: unknown): string {
  const text = typeof value === "string" ? value : String(JSON.stringify(value));
  return JSON.stringify(text.length > 100 ? `${text.slice(0, 100)}…` : text);
}

/** What is wrong with an archive, with where. */
export class TarError extends Error {
  override readonly name = "TarError";
}

export interface TarLimits {
  /** Most entries read (default 100,000). */
  maxEntries?: number;
  /** Largest PAX or GNU long-name header (default 1 MiB). */
  maxHeaderBytes?: number;
}

/** An archive's regular files by name (symbolic links resolved to their target's bytes). */
export type TarFiles = ReadonlyMap<string, Uint8Array>;

function text(bytes: Uint8Array, start: number, length: number): string {
  let end = start;
  while (end < start + length && bytes[end] !== 0) end++;
  return new TextDecoder().decode(bytes.subarray(start, end));
}

/** An octal number field, or a base-256 one (high bit of the first byte set). */
function numberField(bytes: Uint8Array, start: number, length: number, at: number): number {
  if (((bytes[start] as number) & 0x80) !== 0) {
    let n = (bytes[start] as number) & 0x7f;
    for (let i = start + 1; i < start + length; i++) {
      n = n * 256 + (bytes[i] as number);
      if (n > Number.MAX_SAFE_INTEGER) throw new TarError(`entry at ${at}: size out of range`);
    }
    return n;
  }
  const raw = text(bytes, start, length).trim();
  if (raw === "") return 0;
  if (!/^[0-7]+$/.test(raw))
    throw new TarError(`entry at ${at}: number field "${raw}" is not octal`);
  return Number.parseInt(raw, 8);
}

function checksumOk(bytes: Uint8Array, at: number): boolean {
  const stored = numberField(bytes, at + 148, 8, at);
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) {
    sum += i >= 148 && i < 156 ? 32 : (bytes[at + i] as number);
  }
  return sum === stored;
}

/** `name` made relative and checked: no absolute path, no "..". */
function cleanName(name: string): string {
  const parts = name.split("/").filter((p) => p !== "" && p !== ".");
  if (name.startsWith("/") || parts.some((p) => p === "..") || name.includes("\0")) {
    throw new TarError(`entry name ${shown(name)} leaves the archive`);
  }
  return parts.join("/");
}

/** The records of a PAX header ("<len> key=value\n"...). */
function paxRecords(data: Uint8Array, at: number): Map<string, string> {
  const out = new Map<string, string>();
  const all = new TextDecoder().decode(data);
  let pos = 0;
  while (pos < all.length) {
    const space = all.indexOf(" ", pos);
    const len = Number.parseInt(all.slice(pos, space), 10);
    if (space < 0 || !Number.isInteger(len) || len <= space - pos || pos + len > all.length) {
      throw new TarError(`entry at ${at}: malformed PAX header`);
    }
    const record = all.slice(space + 1, pos + len - 1);
    const eq = record.indexOf("=");
    if (eq > 0) out.set(record.slice(0, eq), record.slice(eq + 1));
    pos += len;
  }
  return out;
}

interface Header {
  name: string;
  size: number;
  type: string;
  link: string;
}

function readHeader(bytes: Uint8Array, at: number): Header {
  if (!checksumOk(bytes, at)) throw new TarError(`entry at ${at}: header checksum mismatch`);
  const magic = text(bytes, at + 257, 6);
  const prefix = magic.startsWith("ustar") ? text(bytes, at + 345, 155) : "";
  const base = text(bytes, at + 0, 100);
  return {
    name: prefix === "" ? base : `${prefix}/${base}`,
    size: numberField(bytes, at + 124, 12, at),
    type: String.fromCharCode((bytes[at + 156] as number) || 48),
    link: text(bytes, at + 157, 100),
  };
}

const isZeroBlock = (bytes: Uint8Array, at: number) => {
  for (let i = at; i < at + BLOCK; i++) if (bytes[i] !== 0) return false;
  return true;
};

/** The regular files (and resolved links) of a tar archive in `bytes`. */
export function readTar(bytes: Uint8Array, limits: TarLimits = {}): TarFiles {
  const maxEntries = limits.maxEntries ?? 100_000;
  const maxHeader = limits.maxHeaderBytes ?? 1 << 20;
  const files = new Map<string, Uint8Array>();
  const links = new Map<string, string>();
  let at = 0;
  let entries = 0;
  let longName: string | undefined;
  let pax: Map<string, string> | undefined;
  while (at + BLOCK <= bytes.length) {
    if (isZeroBlock(bytes, at)) return resolveLinks(files, links);
    if (++entries > maxEntries) throw new TarError(`more than ${maxEntries} entries`);
    const h = readHeader(bytes, at);
    const size = pax?.has("size") ? Number(pax.get("size")) : h.size;
    if (!Number.isSafeInteger(size) || size < 0) throw new TarError(`entry at ${at}: bad size`);
    const start = at + BLOCK;
    if (size > bytes.length - start) {
      throw new TarError(`entry at ${at} (${h.name}): ${size} bytes, past the end of the archive`);
    }
    const data = bytes.subarray(start, start + size);
    at = start + Math.ceil(size / BLOCK) * BLOCK;
    if (h.type === "x" || h.type === "L") {
      if (size > maxHeader) throw new TarError(`entry at ${start - BLOCK}: header too large`);
      if (h.type === "x") pax = paxRecords(data, start - BLOCK);
      else longName = text(data, 0, data.length);
      continue;
    }
    if (h.type === "g") continue;
    const name = cleanName(pax?.get("path") ?? longName ?? h.name);
    const link = pax?.get("linkpath") ?? h.link;
    pax = undefined;
    longName = undefined;
    if (name === "" && "0712".includes(h.type)) {
      throw new TarError(`entry at ${start - BLOCK}: a file without a name`);
    }
    if (h.type === "0" || h.type === "7") files.set(name, data);
    else if (h.type === "2") links.set(name, link);
    else if (h.type === "1") links.set(name, `/${cleanName(link)}`);
  }
  if (at < bytes.length || entries === 0) {
    throw new TarError(`truncated: ${bytes.length - at} bytes after the last whole entry`);
  }
  return resolveLinks(files, links);
}

/** `path` with "." and ".." parts resolved; undefined when it climbs out of the root. */
function resolvePath(path: string): string | undefined {
  const out: string[] = [];
  for (const part of path.split("/")) {
    if (part === "" || part === ".") continue;
    if (part !== "..") out.push(part);
    else if (out.pop() === undefined) return undefined;
  }
  return out.join("/");
}

/** Files with each link pointing at a regular file (relative to the link's folder, or from the
 * root for hard links, written "/name") added under the link's name. */
function resolveLinks(
  files: Map<string, Uint8Array>,
  links: ReadonlyMap<string, string>,
): Map<string, Uint8Array> {
  for (const [name, target] of links) {
    const dir = name.includes("/") ? name.slice(0, name.lastIndexOf("/") + 1) : "";
    const resolved = target.startsWith("/") ? resolvePath(target) : resolvePath(dir + target);
    if (resolved === undefined) continue; // a link out of the archive names nothing of it
    const data = files.get(resolved);
    if (data !== undefined) files.set(name, data);
  }
  return files;
}
