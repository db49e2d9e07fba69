import { describe, expect, test } from "bun:test";
import { createHash, X509Certificate } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HubTrust } from "../../../src/agent/hubclient/trust.ts";
import { issue } from "../../../src/hub/tls/certs.ts";
import { ownTls } from "../../../src/hub/tls/index.ts";
import { caHash, joinTokenWithHash, parseJoinToken } from "../../../src/protocol/index.ts";
import { nullLogger } from "../../../src/util/log.ts";

const now = Date.UTC(2026, 0, 1);

function temp(): string {
  return mkdtempSync(join(tmpdir(), "fleetlet-tls-"));
}

describe("hub certificates", () => {
  test("issue() makes a CA and a serving certificate it signed, with the names asked for", () => {
    const ca = issue({ commonName: "test-ca", notBefore: now, notAfter: now + 86_400_000 });
    const serving = issue({
      commonName: "hub",
      notBefore: now,
      notAfter: now + 3_600_000,
      sans: ["localhost", "127.0.0.1", "::1", "hub.example"],
      issuer: { commonName: "test-ca", key: ca.key, publicKey: ca.publicKey },
    });
    const caCert = new X509Certificate(ca.certPem);
    const cert = new X509Certificate(serving.certPem);
    expect(caCert.ca).toBe(true);
    expect(cert.ca).toBe(false);
    expect(cert.verify(caCert.publicKey)).toBe(true);
    expect(cert.checkIssued(caCert)).toBe(true);
    expect(cert.subjectAltName).toBe(
      "DNS:localhost, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1, DNS:hub.example",
    );
    expect(cert.checkHost("hub.example")).toBe("hub.example");
    expect(cert.checkIP("127.0.0.1")).toBe("127.0.0.1");
  });

  test("ownTls() makes them once in <data>/tls with private keys 0600, and remakes only the serving certificate for new names", () => {
    const dir = temp();
    try {
      const first = ownTls(dir, ["localhost", "127.0.0.1"], now);
      const again = ownTls(dir, ["127.0.0.1", "localhost"], now);
      expect(again.renewed).toBe(false);
      expect(again.cert).toBe(first.cert);
      expect(statSync(join(dir, "tls", "ca.key")).mode & 0o777).toBe(0o600);
      expect(statSync(join(dir, "tls", "serving.key")).mode & 0o777).toBe(0o600);
      const wider = ownTls(dir, ["localhost", "127.0.0.1", "hub.example"], now);
      expect(wider.renewed).toBe(true);
      expect(wider.caHash).toBe(first.caHash);
      const later = ownTls(dir, ["localhost", "127.0.0.1", "hub.example"], now + 340 * 86_400_000);
      expect(later.renewed).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("caHash() is sha256 of the CA's SubjectPublicKeyInfo", () => {
    const ca = issue({ commonName: "c", notBefore: now, notAfter: now + 1000 });
    const spki = ca.publicKey.export({ type: "spki", format: "der" });
    expect(caHash(ca.certPem)).toBe(`sha256:${createHash("sha256").update(spki).digest("hex")}`);
  });
});

describe("join tokens with a CA hash", () => {
  const hash = `sha256:${"ab".repeat(32)}`;
  test("parseJoinToken() splits the secret from the hash; a token without one is all secret", () => {
    expect(parseJoinToken(joinTokenWithHash("flj_abc", hash))).toEqual({
      secret: "flj_abc",
      caHash: hash,
    });
    expect(parseJoinToken("flj_abc")).toEqual({ secret: "flj_abc" });
    expect(parseJoinToken("flj_abc:sha256:nothex")).toEqual({ secret: "flj_abc:sha256:nothex" });
  });
});

describe("HubTrust", () => {
  const ca = issue({ commonName: "hub-ca", notBefore: now, notAfter: now + 86_400_000 });
  const other = issue({ commonName: "evil-ca", notBefore: now, notAfter: now + 86_400_000 });
  const serve = (pem: string) => async () => new Response(pem);

  test("trusts the hub's CA when its hash is the join token's, and saves it", async () => {
    const root = temp();
    try {
      const trust = new HubTrust({
        joinToken: joinTokenWithHash("flj_x", caHash(ca.certPem)),
        rootDir: root,
        log: nullLogger,
        fetchUnverified: serve(ca.certPem),
      });
      expect(await trust.resolve("https://hub.example:7443")).toBe(ca.certPem);
      expect(readFileSync(join(root, "hub", "ca.crt"), "utf8")).toBe(ca.certPem);
      const restarted = new HubTrust({
        rootDir: root,
        log: nullLogger,
      });
      expect(restarted.current()).toBe(ca.certPem);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  test("one trust for every URL of the hub: the CA is fetched from the URL tried, then verifies all", async () => {
    const root = temp();
    try {
      const fetched: string[] = [];
      const trust = new HubTrust({
        joinToken: joinTokenWithHash("flj_x", caHash(ca.certPem)),
        rootDir: root,
        log: nullLogger,
        fetchUnverified: async (u) => {
          fetched.push(u);
          if (u.startsWith("https://hub-a")) throw new Error("connection refused");
          return new Response(ca.certPem);
        },
      });
      await expect(trust.resolve("https://hub-a:7443")).rejects.toThrow(
        "cannot fetch the hub's CA from https://hub-a:7443/api/v1/hub-ca: connection refused",
      );
      expect(await trust.resolve("wss://hub-b:7443")).toBe(ca.certPem);
      expect(await trust.resolve("https://hub-a:7443")).toBe(ca.certPem);
      expect(trust.current()).toBe(ca.certPem);
      expect(fetched).toEqual([
        "https://hub-a:7443/api/v1/hub-ca",
        "https://hub-b:7443/api/v1/hub-ca",
      ]);
      expect(readFileSync(join(root, "hub", "ca.crt"), "utf8")).toBe(ca.certPem);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  test("refuses a hub whose CA is not the one the token names, and saves nothing", async () => {
    const root = temp();
    try {
      const trust = new HubTrust({
        joinToken: joinTokenWithHash("flj_x", caHash(ca.certPem)),
        rootDir: root,
        log: nullLogger,
        fetchUnverified: serve(other.certPem),
      });
      await expect(trust.resolve("wss://hub.example:7443")).rejects.toThrow(
        "is not the one the join token names",
      );
      expect(existsSync(join(root, "hub", "ca.crt"))).toBe(false);
      expect(trust.current()).toBeUndefined();
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  test("a caFile must match the token's hash; a plain URL or a token without hash needs no CA", async () => {
    const root = temp();
    try {
      const file = join(root, "ca.pem");
      writeFileSync(file, other.certPem);
      expect(
        () =>
          new HubTrust({
            caFile: file,
            joinToken: joinTokenWithHash("flj_x", caHash(ca.certPem)),
            rootDir: root,
            log: nullLogger,
          }),
      ).toThrow("is not the one the join token names");
      const fetched: string[] = [];
      const plain = new HubTrust({
        joinToken: joinTokenWithHash("flj_x", caHash(ca.certPem)),
        rootDir: root,
        log: nullLogger,
        fetchUnverified: async (u) => {
          fetched.push(u);
          return new Response(ca.certPem);
        },
      });
      expect(await plain.resolve("http://127.0.0.1:7443")).toBeUndefined();
      const noHash = new HubTrust({
        joinToken: "flj_x",
        rootDir: root,
        log: nullLogger,
      });
      expect(await noHash.resolve("https://hub.example")).toBeUndefined();
      expect(fetched).toEqual([]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
