// The image store of the fake runtime: images present on the node and a pretend registry that
// PullImage copies from. References are normalized like containerd does ("busybox" is
// "docker.io/library/busybox:latest"); ids and digests are derived from the reference, so the
// same reference always gives the same id.

import { GrpcStatus } from "./errors.ts";
import { failed, normalizeImageRef } from "./fake-support.ts";
import type { AuthConfig } from "./requests.ts";
import type * as t from "./types.ts";

export interface FakeImageOptions {
  /** Bytes. Default 1 MiB. */
  size?: number;
  pinned?: boolean;
}

export interface RegistryImageOptions {
  size?: number;
  /** When set, PullImage needs these credentials (username/password or `auth`). */
  credentials?: { username: string; password: string };
}

function digestOf(text: string): string {
  let h = 0xcbf29ce484222325n;
  for (const ch of new TextEncoder().encode(text)) {
    h = ((h ^ BigInt(ch)) * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return `sha256:${h.toString(16).padStart(16, "0").repeat(4)}`;
}

function repoOf(normalized: string): string {
  const at = normalized.indexOf("@");
  if (at !== -1) return normalized.slice(0, at);
  const colon = normalized.lastIndexOf(":");
  return colon > normalized.lastIndexOf("/") ? normalized.slice(0, colon) : normalized;
}

export class FakeImages {
  /** Present images by id. */
  readonly present = new Map<string, t.Image>();
  /** Pullable images by normalized reference. */
  readonly registry = new Map<string, RegistryImageOptions>();

  constructor(private readonly nowNs: () => number) {}

  /** Makes an image present, as if pulled or imported; returns it. */
  add(ref: string, options: FakeImageOptions = {}): t.Image {
    const name = normalizeImageRef(ref);
    const id = digestOf(`config:${name}`);
    const image = this.present.get(id) ?? {
      id,
      repoTags: [],
      repoDigests: [],
      size: options.size ?? 1024 * 1024,
      uid: null,
      username: "",
      spec: null,
      pinned: options.pinned ?? false,
    };
    if (name.includes("@")) {
      if (!image.repoDigests.includes(name)) image.repoDigests.push(name);
    } else {
      if (!image.repoTags.includes(name)) image.repoTags.push(name);
      const digest = `${repoOf(name)}@${digestOf(`manifest:${name}`)}`;
      if (!image.repoDigests.includes(digest)) image.repoDigests.push(digest);
    }
    this.present.set(id, image);
    return image;
  }

  /** Lets PullImage fetch `ref`. */
  addToRegistry(ref: string, options: RegistryImageOptions = {}): void {
    this.registry.set(normalizeImageRef(ref), options);
  }

  /** The present image a reference, id, or digest reference names. */
  find(ref: string): t.Image | undefined {
    if (ref === "") return undefined;
    if (ref.startsWith("sha256:")) return this.present.get(ref);
    if (/^[0-9a-f]{64}$/.test(ref)) return this.present.get(`sha256:${ref}`);
    let name: string;
    try {
      name = normalizeImageRef(ref);
    } catch {
      return undefined;
    }
    for (const image of this.present.values()) {
      if (image.repoTags.includes(name) || image.repoDigests.includes(name)) return image;
    }
    return undefined;
  }

  list(filter: string): t.Image[] {
    const images = filter
      ? [this.find(filter)].filter((i) => i !== undefined)
      : this.present.values();
    return [...images].map((i) => structuredClone(i));
  }

  /** Pulls like containerd: NotFound when the registry lacks it; returns the image id. */
  pull(ref: string, auth?: AuthConfig): string {
    let name: string;
    try {
      name = normalizeImageRef(ref);
    } catch (err) {
      throw failed("PullImage", (err as Error).message, GrpcStatus.INVALID_ARGUMENT);
    }
    const entry = this.registry.get(name);
    if (!entry) {
      throw failed(
        "PullImage",
        `failed to pull and unpack image ${JSON.stringify(name)}: failed to resolve reference ${JSON.stringify(name)}: ${name}: not found`,
        GrpcStatus.NOT_FOUND,
      );
    }
    if (entry.credentials && !authMatches(entry.credentials, auth)) {
      throw failed(
        "PullImage",
        `failed to pull and unpack image ${JSON.stringify(name)}: failed to resolve reference ${JSON.stringify(name)}: pulling from host ${name.split("/")[0]} failed with status code [manifests]: 401 Unauthorized`,
      );
    }
    return this.add(name, { size: entry.size }).id;
  }

  /** Removes the image a reference names (all its tags); a missing image is not an error. */
  remove(ref: string): void {
    const image = this.find(ref);
    if (image) this.present.delete(image.id);
  }

  fsUsage(): t.FilesystemUsage {
    let used = 0;
    for (const image of this.present.values()) used += image.size;
    return {
      timestamp: this.nowNs(),
      fsId: { mountpoint: "/var/lib/fake-runtime/images" },
      usedBytes: { value: used },
      inodesUsed: { value: this.present.size },
    };
  }
}

function authMatches(want: { username: string; password: string }, got?: AuthConfig): boolean {
  if (!got) return false;
  if (got.username === want.username && got.password === want.password) return true;
  return got.auth === btoa(`${want.username}:${want.password}`);
}
