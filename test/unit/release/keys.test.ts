import { describe, expect, test } from "bun:test";
import {
  findSigningKey,
  generateReleaseKeys,
  KeyError,
  parsePublicKey,
  parsePublicKeys,
  readPrivateKey,
  signRelease,
} from "../../../src/release/keys.ts";
import { parseManifest, type ReleaseFields } from "../../../src/release/manifest.ts";
import { ReleaseCheckError, verifyManifest } from "../../../src/release/verify.ts";

const fields: ReleaseFields = {
  version: "0.2.0",
  arch: "arm64",
  size: 1234,
  sha256: "a".repeat(64),
};

async function keyPair() {
  const k = await generateReleaseKeys();
  return {
    ...k,
    priv: await readPrivateKey(k.privatePem),
    pub: await parsePublicKey(k.publicLine),
  };
}

async function reason(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    if (err instanceof ReleaseCheckError) return err.reason;
    throw err;
  }
  return "none";
}

describe("release keys and signatures", () => {
  test("generateReleaseKeys() gives a PKCS #8 PEM and an ed25519: line of 32 bytes", async () => {
    const k = await generateReleaseKeys();
    expect(k.privatePem).toMatch(
      /^-----BEGIN PRIVATE KEY-----\n[A-Za-z0-9+/=\n]+-----END PRIVATE KEY-----\n$/,
    );
    expect(k.publicLine).toMatch(/^ed25519:[A-Za-z0-9+/]{43}=$/);
  });

  test("a signed manifest verifies, through its text, against its key", async () => {
    const k = await keyPair();
    const { text } = await signRelease(k.priv, fields);
    const v = await verifyManifest(text, [k.pub], "arm64");
    expect(v.key.line).toBe(k.publicLine);
    expect(v.manifest.version).toBe("0.2.0");
  });

  test("a manifest with any field changed after signing has a bad signature", async () => {
    const k = await keyPair();
    const { text } = await signRelease(k.priv, fields);
    for (const [from, to] of [
      ["version: 0.2.0", "version: 0.2.1"],
      ["arch: arm64", "arch: amd64"],
      ["size: 1234", "size: 1235"],
      ["sha256: a", "sha256: b"],
    ] as const) {
      expect(await reason(verifyManifest(text.replace(from, to), [k.pub]))).toBe("signature");
    }
  });

  test("a manifest signed with another key has a bad signature", async () => {
    const [a, b] = [await keyPair(), await keyPair()];
    const { text } = await signRelease(a.priv, fields);
    expect(await reason(verifyManifest(text, [b.pub]))).toBe("signature");
  });

  test("with a list of trusted keys (a rotation) a manifest signed with either one verifies", async () => {
    const [old, next] = [await keyPair(), await keyPair()];
    const signedOld = (await signRelease(old.priv, fields)).text;
    const signedNew = (await signRelease(next.priv, fields)).text;
    const keys = await parsePublicKeys(`# old\n${old.publicLine}\n\n${next.publicLine}\n`);
    expect((await verifyManifest(signedOld, keys)).key.line).toBe(old.publicLine);
    expect((await verifyManifest(signedNew, keys)).key.line).toBe(next.publicLine);
    expect(await findSigningKey(parseManifest(signedNew), [old.pub])).toBeUndefined();
  });

  test("verifyManifest() refuses a malformed manifest, no keys, and another arch, each with its reason", async () => {
    const k = await keyPair();
    const { text } = await signRelease(k.priv, fields);
    expect(await reason(verifyManifest(text.replace("size: ", "size:"), [k.pub]))).toBe(
      "malformed",
    );
    expect(await reason(verifyManifest(text, []))).toBe("no-keys");
    expect(await reason(verifyManifest(text, [k.pub], "amd64"))).toBe("arch");
  });

  test.each([
    ["no prefix", "y6hwKuu+piPkq/QEsSNvKVCZpFtF2cw9G+A5N5+xEoI="],
    ["31 bytes", `ed25519:${Buffer.alloc(31).toString("base64")}`],
    ["33 bytes", `ed25519:${Buffer.alloc(33).toString("base64")}`],
    ["not base64", "ed25519:!!!!"],
    ["an rsa key", "ssh-rsa AAAA"],
  ])("parsePublicKey() refuses %s with a KeyError", async (_, line) => {
    await expect(parsePublicKey(line)).rejects.toThrow(KeyError);
  });

  test("readPrivateKey() refuses a public key, a non-Ed25519 key, and garbage with a KeyError", async () => {
    const k = await generateReleaseKeys();
    await expect(readPrivateKey(k.publicLine)).rejects.toThrow(KeyError);
    await expect(readPrivateKey("garbage")).rejects.toThrow(KeyError);
    const p256 = (await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, [
      "sign",
    ])) as CryptoKeyPair;
    const der = Buffer.from(await crypto.subtle.exportKey("pkcs8", p256.privateKey));
    const pem = `-----BEGIN PRIVATE KEY-----\n${der.toString("base64")}\n-----END PRIVATE KEY-----\n`;
    await expect(readPrivateKey(pem)).rejects.toThrow("not an Ed25519 private key");
  });

  test("readPrivateKey() reads a key made by openssl genpkey, and a PEM with CRLF line ends", async () => {
    const made = Bun.spawnSync(["openssl", "genpkey", "-algorithm", "ed25519"]);
    expect(made.exitCode).toBe(0);
    await signRelease(await readPrivateKey(made.stdout.toString()), fields);
    const k = await generateReleaseKeys();
    const crlf = k.privatePem.replaceAll("\n", "\r\n");
    const priv = await readPrivateKey(crlf);
    const { text } = await signRelease(priv, fields);
    await verifyManifest(text, [await parsePublicKey(k.publicLine)]);
  });
});
