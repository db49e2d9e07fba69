// Helpers of the fake runtime that behave like containerd's CRI plugin: image name
// normalization, id prefix resolution, filters, and errors worded like containerd's.

import { CriError, GrpcStatus } from "./errors.ts";
import type { Labels } from "./types.ts";

/**
 * Normalizes an image reference the way containerd does: "busybox" becomes
 * "docker.io/library/busybox:latest"; a reference with a digest keeps it and gets no tag.
 */
export function normalizeImageRef(ref: string): string {
  if (ref === "" || /\s/.test(ref))
    throw new Error(`Invalid image reference ${JSON.stringify(ref)}`);
  if (ref.startsWith("sha256:")) return ref;
  const slash = ref.indexOf("/");
  const first = slash === -1 ? "" : ref.slice(0, slash);
  const hasDomain =
    first !== "" && (first.includes(".") || first.includes(":") || first === "localhost");
  let name = hasDomain ? ref : `docker.io/${slash === -1 ? `library/${ref}` : ref}`;
  if (name.startsWith("docker.io/") && !name.slice(10).includes("/")) {
    name = `docker.io/library/${name.slice(10)}`;
  }
  const lastPart = name.slice(name.lastIndexOf("/") + 1);
  if (!name.includes("@") && !lastPart.includes(":")) name = `${name}:latest`;
  return name;
}

/** The object with this exact id, else the only one whose id starts with it (as containerd). */
export function resolveId<T>(items: ReadonlyMap<string, T>, idOrPrefix: string): T | undefined {
  if (idOrPrefix === "") return undefined;
  const exact = items.get(idOrPrefix);
  if (exact) return exact;
  let found: T | undefined;
  for (const [id, item] of items) {
    if (!id.startsWith(idOrPrefix)) continue;
    if (found) return undefined;
    found = item;
  }
  return found;
}

/** Every key of the selector is present in labels with the same value. */
export function matchesLabels(labels: Labels, selector: Labels | undefined): boolean {
  if (!selector) return true;
  return Object.entries(selector).every(([k, v]) => labels[k] === v);
}

/** The reason containerd gives an exited container. */
export function exitReason(exitCode: number): string {
  return exitCode === 0 ? "Completed" : "Error";
}

export function notFound(rpc: string, kind: string, id: string): CriError {
  return new CriError({
    rpc,
    grpcStatus: GrpcStatus.NOT_FOUND,
    runtimeMessage: `an error occurred when try to find ${kind} ${JSON.stringify(id)}: not found`,
  });
}

export function failed(rpc: string, message: string, grpcStatus: number = GrpcStatus.UNKNOWN) {
  return new CriError({ rpc, grpcStatus, runtimeMessage: message });
}

export function fakeId(prefix: string, n: number): string {
  return `${prefix}${n.toString(16).padStart(12, "0")}`;
}

export function bytes(text: string): Uint8Array {
  return new TextEncoder().encode(text);
}
