// Release signing keys: Ed25519 through WebCrypto. The private key is kept as PKCS #8 in PEM
// ("PRIVATE KEY"), the form openssl reads; a public key is one line, `ed25519:<base64 of its 32
// bytes>`, short enough for a device's config. A device trusts a list of public keys so that a
// key can be rotated: a manifest is good when any one of them verifies its signature.
import {
  type ReleaseFields,
  type ReleaseManifest,
  serializeManifest,
  signedBytes,
} from "./manifest.ts";

const ED25519 = { name: "Ed25519" } as const;
const PUBLIC_PREFIX = "ed25519:";
const PUBLIC_BYTES = 32;
const PEM_LABEL = "PRIVATE KEY";

/** A key that cannot be read: its text is not what the key formats above say. */
export class KeyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "KeyError";
  }
}

/** A public key a device trusts. */
export interface PublicKey {
  /** The line it was read from (`ed25519:…`), to name it in messages. */
  line: string;
  key: CryptoKey;
}

/** A new key pair as text: the private key's PEM and the public key's line. */
export async function generateReleaseKeys(): Promise<{ privatePem: string; publicLine: string }> {
  const pair = (await crypto.subtle.generateKey(ED25519, true, [
    "sign",
    "verify",
  ])) as CryptoKeyPair;
  const pkcs8 = Buffer.from(await crypto.subtle.exportKey("pkcs8", pair.privateKey));
  const raw = Buffer.from(await crypto.subtle.exportKey("raw", pair.publicKey));
  const body = pkcs8.toString("base64").replace(/.{1,64}/g, "$&\n");
  return {
    privatePem: `-----BEGIN ${PEM_LABEL}-----\n${body}-----END ${PEM_LABEL}-----\n`,
    publicLine: `${PUBLIC_PREFIX}${raw.toString("base64")}`,
  };
}

/** Reads an Ed25519 private key from PKCS #8 PEM. */
export async function readPrivateKey(pem: string): Promise<CryptoKey> {
  const m = /-----BEGIN PRIVATE KEY-----\r?\n([A-Za-z0-9+/=\r\n]+)-----END PRIVATE KEY-----/.exec(
    pem,
  );
  if (m?.[1] === undefined) {
    throw new KeyError("not a private key in PEM (want -----BEGIN PRIVATE KEY-----)");
  }
  const der = Buffer.from(m[1].replace(/\s+/g, ""), "base64");
  try {
    return await crypto.subtle.importKey("pkcs8", der, ED25519, false, ["sign"]);
  } catch {
    throw new KeyError("not an Ed25519 private key (PKCS #8)");
  }
}

/** Reads one public key line, `ed25519:<base64 of 32 bytes>` (spaces around it ignored). */
export async function parsePublicKey(text: string): Promise<PublicKey> {
  const line = text.trim();
  const shown = JSON.stringify(line.length > 60 ? `${line.slice(0, 60)}…` : line);
  if (!line.startsWith(PUBLIC_PREFIX)) {
    throw new KeyError(`not a public key: ${shown} (want ${PUBLIC_PREFIX}<base64>)`);
  }
  const b64 = line.slice(PUBLIC_PREFIX.length);
  const raw = Buffer.from(b64, "base64");
  if (raw.length !== PUBLIC_BYTES || raw.toString("base64") !== b64) {
    throw new KeyError(`not a public key: ${shown} (want the base64 of ${PUBLIC_BYTES} bytes)`);
  }
  try {
    return { line, key: await crypto.subtle.importKey("raw", raw, ED25519, true, ["verify"]) };
  } catch {
    throw new KeyError(`not an Ed25519 public key: ${shown}`);
  }
}

/** Reads a list of public keys, one a line; blank lines and lines starting with # are skipped. */
export async function parsePublicKeys(text: string): Promise<PublicKey[]> {
  const lines = text.split("\n").map((l) => l.trim());
  return Promise.all(lines.filter((l) => l !== "" && !l.startsWith("#")).map(parsePublicKey));
}

/** Signs `fields` with `privateKey`; returns the manifest and its text. */
export async function signRelease(
  privateKey: CryptoKey,
  fields: ReleaseFields,
): Promise<{ manifest: ReleaseManifest; text: string }> {
  const sig = await crypto.subtle.sign(ED25519, privateKey, signedBytes(fields));
  const manifest = { ...fields, signature: new Uint8Array(sig) };
  return { manifest, text: serializeManifest(manifest) };
}

/** The first of `keys` that verifies the manifest's signature, or undefined when none does. */
export async function findSigningKey(
  manifest: ReleaseManifest,
  keys: readonly PublicKey[],
): Promise<PublicKey | undefined> {
  const data = signedBytes(manifest);
  for (const k of keys) {
    if (await crypto.subtle.verify(ED25519, k.key, manifest.signature, data)) return k;
  }
  return undefined;
}
