// A release checked the way a device checks it: the manifest's form, its signature against the
// device's trusted keys, its architecture, and (once the bytes are at hand) size and sha256.
// Each failure is a ReleaseCheckError whose `reason` callers branch on and report.
import { digestFile } from "./digest.ts";
import { findSigningKey, type PublicKey } from "./keys.ts";
import { type Arch, ManifestError, parseManifest, type ReleaseManifest } from "./manifest.ts";

export type ReleaseCheckReason = "malformed" | "signature" | "no-keys" | "arch" | "size" | "sha256";

/** A release that must not be installed, and why. */
export class ReleaseCheckError extends Error {
  constructor(
    readonly reason: ReleaseCheckReason,
    message: string,
  ) {
    super(message);
    this.name = "ReleaseCheckError";
  }
}

export interface VerifiedManifest {
  manifest: ReleaseManifest;
  /** The trusted key that verified it. */
  key: PublicKey;
}

/**
 * Parses the manifest and checks its signature against `keys` and, when given, its arch against
 * `arch` (the device's own). Throws ReleaseCheckError.
 */
export async function verifyManifest(
  text: string | Uint8Array,
  keys: readonly PublicKey[],
  arch?: Arch,
): Promise<VerifiedManifest> {
  let manifest: ReleaseManifest;
  try {
    manifest = parseManifest(text);
  } catch (err) {
    if (err instanceof ManifestError) throw new ReleaseCheckError("malformed", err.message);
    throw err;
  }
  if (keys.length === 0) throw new ReleaseCheckError("no-keys", "no trusted public key is set");
  const key = await findSigningKey(manifest, keys);
  if (key === undefined) {
    const n = keys.length === 1 ? "the trusted key" : `any of the ${keys.length} trusted keys`;
    throw new ReleaseCheckError(
      "signature",
      `bad signature: the manifest of ${manifest.version} (${manifest.arch}) does not verify against ${n} (signed with another key, or changed since it was signed)`,
    );
  }
  if (arch !== undefined && manifest.arch !== arch) {
    throw new ReleaseCheckError(
      "arch",
      `arch mismatch: release ${manifest.version} is for ${manifest.arch}, this device is ${arch}`,
    );
  }
  return { manifest, key };
}

/** Checks the executable at `path` against the manifest's size and sha256 (streamed). */
export async function checkExecutable(manifest: ReleaseManifest, path: string): Promise<void> {
  const d = await digestFile(path);
  if (d.size !== manifest.size) {
    throw new ReleaseCheckError(
      "size",
      `size mismatch: ${path} has ${d.size} bytes, the manifest says ${manifest.size}`,
    );
  }
  if (d.sha256 !== manifest.sha256) {
    throw new ReleaseCheckError(
      "sha256",
      `sha256 mismatch: ${path} has ${d.sha256}, the manifest says ${manifest.sha256}`,
    );
  }
}
