// Secrets at rest (docs/deploy.md, "Secrets at rest"): the hub's store keeps each Secret's body
// sealed with AES-256-GCM under a key from a key file, so that a copy of the database alone
// (a backup, a disk image without the key's file) reveals no Secret. The key file holds one key
// a line (32 bytes, base64); the first seals, every one opens, so a key is rotated by putting a
// new one first and keeping the old one until the hub has started once (it seals again what an
// older key sealed). A sealed body names its key and is bound to the Secret's namespace and
// name: a row moved to another Secret does not open.
import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";
import { chmodSync, existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";

const PREFIX = "sealed:v1:";
const IV_BYTES = 12;
const TAG_BYTES = 16;

interface Key {
  /** The first 8 hex digits of the key's sha256: names the key in a sealed body. */
  id: string;
  bytes: Buffer;
}

/** A Secret could not be opened: its key is missing, or it was changed. */
export class SealError extends Error {}

/** Whether `stored` is a sealed body (else a plain one, written before sealing). */
export function isSealed(stored: string): boolean {
  return stored.startsWith(PREFIX);
}

export class SecretSealer {
  private readonly keys: readonly Key[];

  constructor(keys: readonly Buffer[]) {
    if (keys.length === 0) throw new Error("a secrets key file needs at least one key");
    this.keys = keys.map((bytes) => ({
      id: createHash("sha256").update(bytes).digest("hex").slice(0, 8),
      bytes,
    }));
  }

  /** The id of the key that seals. */
  get sealingKeyId(): string {
    return (this.keys[0] as Key).id;
  }

  /** Seals `text` (a Secret's JSON) for the Secret `binding` ("namespace/name"). */
  seal(text: string, binding: string): string {
    const key = this.keys[0] as Key;
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv("aes-256-gcm", key.bytes, iv);
    cipher.setAAD(Buffer.from(binding));
    const body = Buffer.concat([cipher.update(text, "utf8"), cipher.final()]);
    const sealed = Buffer.concat([iv, body, cipher.getAuthTag()]).toString("base64");
    return `${PREFIX}${key.id}:${sealed}`;
  }

  /** The key id a sealed body names (undefined for a plain one). */
  keyIdOf(stored: string): string | undefined {
    if (!isSealed(stored)) return undefined;
    return stored.slice(PREFIX.length).split(":", 1)[0];
  }

  /** Opens a body sealed for `binding`; a plain body is returned as it is. */
  open(stored: string, binding: string): string {
    if (!isSealed(stored)) return stored;
    const rest = stored.slice(PREFIX.length);
    const colon = rest.indexOf(":");
    const id = rest.slice(0, colon);
    const key = this.keys.find((k) => k.id === id);
    if (colon < 0 || key === undefined)
      throw new SealError(
        `Secret ${binding} was sealed with key ${id}, which the secrets key file does not hold (it holds ${this.keys.map((k) => k.id).join(", ")})`,
      );
    const raw = Buffer.from(rest.slice(colon + 1), "base64");
    if (raw.length < IV_BYTES + TAG_BYTES)
      throw new SealError(`Secret ${binding}: sealed body too short`);
    const decipher = createDecipheriv("aes-256-gcm", key.bytes, raw.subarray(0, IV_BYTES));
    decipher.setAAD(Buffer.from(binding));
    decipher.setAuthTag(raw.subarray(raw.length - TAG_BYTES));
    try {
      const body = raw.subarray(IV_BYTES, raw.length - TAG_BYTES);
      return Buffer.concat([decipher.update(body), decipher.final()]).toString("utf8");
    } catch {
      throw new SealError(
        `Secret ${binding} does not open with key ${id}: the stored body was changed, or belongs to another Secret`,
      );
    }
  }
}

/** The keys of a key file's text; throws naming the first bad line. */
export function parseKeyFile(text: string, path: string): Buffer[] {
  const keys: Buffer[] = [];
  for (const [i, raw] of text.split("\n").entries()) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const bytes = /^[A-Za-z0-9+/]+={0,2}$/.test(line) ? Buffer.from(line, "base64") : undefined;
    if (bytes?.length !== 32)
      throw new Error(
        `secrets key file ${path}, line ${i + 1}: want 32 bytes in base64 (44 characters)`,
      );
    keys.push(bytes);
  }
  if (keys.length === 0) throw new Error(`secrets key file ${path} holds no key`);
  return keys;
}

/**
 * The sealer of the key file at `path`. A missing file is made, with a new random key, when
 * `create` (the hub's default file in its data folder); a key file named by the operator must
 * exist. The file must be readable by the hub's user only.
 */
export function loadSealer(
  path: string,
  create: boolean,
): { sealer: SecretSealer; created: boolean } {
  let created = false;
  if (!existsSync(path)) {
    if (!create) throw new Error(`secrets key file ${path} does not exist`);
    const tmp = `${path}.tmp`;
    writeFileSync(tmp, `${randomBytes(32).toString("base64")}\n`, { mode: 0o600 });
    chmodSync(tmp, 0o600);
    renameSync(tmp, path);
    created = true;
  }
  return { sealer: new SecretSealer(parseKeyFile(readFileSync(path, "utf8"), path)), created };
}
