import { describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { createPrivateKey, createPublicKey, X509Certificate } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { issue } from "../../../src/hub/tls/certs.ts";
import { ownTls } from "../../../src/hub/tls/index.ts";

const DAY = 86_400_000;
const now = Date.UTC(2026, 5, 1);
const hasOpenssl = existsSync("/usr/bin/openssl");

/** openssl's verdict on the hub's serving certificate, checked against its CA at `atMs`. */
function verifyAt(dir: string, atMs: number): string {
  const tls = join(dir, "tls");
  const r = spawnSync("/usr/bin/openssl", [
    "verify",
    "-attime",
    String(Math.floor(atMs / 1000)),
    "-CAfile",
    join(tls, "ca.crt"),
    join(tls, "serving.crt"),
  ]);
  return `${r.stdout}${r.stderr}`.trim();
}

describe("the hub's own certificates and devices whose clock is behind", () => {
  test("ownTls() backdates the CA and the serving certificate to 1970 and keeps their lifetimes from now", () => {
    const dir = mkdtempSync(join(tmpdir(), "fleetlet-tls-"));
    try {
      const tls = ownTls(dir, ["localhost", "127.0.0.1"], now);
      const ca = new X509Certificate(tls.caPem ?? "");
      const serving = new X509Certificate(tls.cert);
      expect(Date.parse(ca.validFrom)).toBe(0);
      expect(Date.parse(serving.validFrom)).toBe(0);
      expect(Date.parse(ca.validTo)).toBe(now + 3650 * DAY);
      expect(Date.parse(serving.validTo)).toBe(now + 365 * DAY);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test.skipIf(!hasOpenssl)(
    "a verifier whose clock reads 1970, the build date or hours behind accepts the chain; one past notAfter refuses it",
    () => {
      const dir = mkdtempSync(join(tmpdir(), "fleetlet-tls-"));
      try {
        ownTls(dir, ["localhost"], now);
        for (const at of [60_000, Date.UTC(2025, 0, 1), now - 5 * 3_600_000, now + 3_600_000])
          expect(verifyAt(dir, at)).toEndWith(": OK");
        expect(verifyAt(dir, now + 366 * DAY)).toContain("certificate has expired");
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );
});

describe("a hub whose serving certificate predates the backdating", () => {
  test("ownTls() makes the serving certificate again, backdated, with the same CA", () => {
    const dir = mkdtempSync(join(tmpdir(), "fleetlet-tls-"));
    try {
      const first = ownTls(dir, ["localhost"], now);
      const tlsDir = join(dir, "tls");
      const ca = new X509Certificate(first.caPem ?? "");
      const key = createPrivateKey(readFileSync(join(tlsDir, "ca.key")));
      const old = issue({
        commonName: "fleetlet-hub",
        notBefore: now - 60_000,
        notAfter: now + 365 * DAY,
        sans: ["localhost"],
        issuer: {
          commonName: ca.subject.replace(/^.*CN=/s, ""),
          key,
          publicKey: createPublicKey(key),
        },
      });
      writeFileSync(join(tlsDir, "serving.crt"), old.certPem);
      writeFileSync(join(tlsDir, "serving.key"), old.keyPem);
      const again = ownTls(dir, ["localhost"], now);
      expect(again.renewed).toBe(true);
      expect(again.caHash).toBe(first.caHash);
      expect(Date.parse(new X509Certificate(again.cert).validFrom)).toBe(0);
      expect(ownTls(dir, ["localhost"], now).renewed).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
