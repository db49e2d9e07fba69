// The hub's TLS material (docs/protocol.md, "TLS and trust"): the operator's certificate and key
// when given, else the hub's own CA and a serving certificate in <data>/tls, made on first start
// and made again (same CA) when the serving certificate nears expiry or its names no longer
// cover the wanted ones.

import { createPrivateKey, createPublicKey, X509Certificate } from "node:crypto";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { isIP } from "node:net";
import { hostname, networkInterfaces } from "node:os";
import { join } from "node:path";
import { caHash } from "../../protocol/trust.ts";
import { writeFileAtomic } from "../../util/atomic-file.ts";
import { ipBytes, issue } from "./certs.ts";

export interface HubTls {
  cert: string;
  key: string;
  /** The CA as PEM (the hub's own, or --tls-ca), absent when unknown. */
  caPem?: string;
  /** sha256:<hex> of the CA, put into join tokens. */
  caHash?: string;
}

const DAY = 86_400_000;
const CA_LIFETIME = 3650 * DAY;
const SERVING_LIFETIME = 365 * DAY;
const RENEW_BEFORE = 30 * DAY;
/** notBefore of the hub's own CA and serving certificate: the Unix epoch, so that a device whose
 * clock is behind (a board without a real-time clock boots in 1970 or at its build date) still
 * accepts them (docs/protocol.md, "TLS and trust"). */
const OWN_NOT_BEFORE = 0;

/** The names the serving certificate should cover: loopback, this host, its addresses (not
 * link-local ones, which no client dials by), and the extra ones. */
export function defaultSans(listenHost: string, extra: string[]): string[] {
  const names = new Set(["localhost", "127.0.0.1", "::1", hostname()]);
  if (listenHost !== "" && listenHost !== "0.0.0.0" && listenHost !== "::") names.add(listenHost);
  for (const addrs of Object.values(networkInterfaces()))
    for (const a of addrs ?? [])
      if (!a.internal && !/^fe80:/i.test(a.address)) names.add(a.address.replace(/%.*$/, ""));
  for (const s of extra) if (s.trim() !== "") names.add(s.trim());
  return [...names];
}

/** Written whole or not at all: a torn key or certificate would stop the hub's next start. */
function writeSecret(path: string, text: string): void {
  writeFileAtomic(path, text, { mode: 0o600 });
}

/** A name or address in one comparable form (addresses as bytes: "::1" = "0:0:0:0:0:0:0:1"). */
function sanKey(s: string): string {
  return isIP(s) !== 0 ? ipBytes(s).toString("hex") : s.toLowerCase();
}

/** How long before its end a serving certificate of `lifetimeMs` is made again: 30 days, or a
 * third of a shorter lifetime. */
function renewBefore(lifetimeMs: number): number {
  return Math.min(RENEW_BEFORE, Math.floor(lifetimeMs / 3));
}

/** Whether the serving certificate at `path` is valid from the epoch (a hub made before the
 * backdating remakes it) past `now` + `before` for every name, and
 * `keyPath` holds its key (a renewal cut short between the two files leaves them apart). */
function servingUsable(
  path: string,
  keyPath: string,
  sans: string[],
  now: number,
  before: number,
): boolean {
  if (!existsSync(path) || !existsSync(keyPath)) return false;
  const cert = new X509Certificate(readFileSync(path));
  if (Date.parse(cert.validTo) - now < before) return false;
  if (Date.parse(cert.validFrom) > OWN_NOT_BEFORE) return false;
  if (!cert.checkPrivateKey(createPrivateKey(readFileSync(keyPath)))) return false;
  const have = new Set(
    (cert.subjectAltName ?? "").split(", ").map((s) => sanKey(s.replace(/^(DNS|IP Address):/, ""))),
  );
  return sans.every((s) => have.has(sanKey(s)));
}

/** A new CA of the hub's own, valid from the epoch for 10 years from `now`. */
function newCa(now: number): { certPem: string; keyPem: string } {
  return issue({
    commonName: `fleetlet-hub-ca@${Math.floor(now / 1000)}`,
    notBefore: OWN_NOT_BEFORE,
    notAfter: now + CA_LIFETIME,
  });
}

/** A serving certificate for `sans` issued by the CA `caPem` (its key `caKeyPem`). */
function newServing(
  caPem: string,
  caKeyPem: string,
  sans: string[],
  now: number,
  servingLifetimeMs: number,
): { certPem: string; keyPem: string } {
  const key = createPrivateKey(caKeyPem);
  const ca = new X509Certificate(caPem);
  return issue({
    commonName: "fleetlet-hub",
    notBefore: OWN_NOT_BEFORE,
    notAfter: Math.min(now + servingLifetimeMs, Date.parse(ca.validTo)),
    sans,
    issuer: {
      commonName: ca.subject.replace(/^.*CN=/s, "").trim(),
      key,
      publicKey: createPublicKey(key),
    },
  });
}

/** The PEM files of the hub's own TLS in `<dataDir>/tls`. */
export interface OwnTlsFiles {
  caCert: string;
  caKey: string;
  servingCert: string;
  servingKey: string;
}

/** A new CA of the hub's own and a serving certificate for `sans`, not yet written anywhere (the
 * replicas' shared ones, stored by the first replica: docs/hub-replicas.md). */
export function newOwnTls(
  sans: string[],
  now: number,
  servingLifetimeMs = SERVING_LIFETIME,
): OwnTlsFiles {
  const ca = newCa(now);
  const serving = newServing(ca.certPem, ca.keyPem, sans, now, servingLifetimeMs);
  return {
    caCert: ca.certPem,
    caKey: ca.keyPem,
    servingCert: serving.certPem,
    servingKey: serving.keyPem,
  };
}

/** Writes `files` into `<dataDir>/tls` as ownTls() keeps its own (it renews the serving
 * certificate from there when it nears its end or misses a name). */
export function writeOwnTls(dataDir: string, files: OwnTlsFiles): void {
  const dir = join(dataDir, "tls");
  if (!existsSync(dir)) mkdirSync(dir, { recursive: true, mode: 0o700 });
  writeSecret(join(dir, "ca.key"), files.caKey);
  writeFileAtomic(join(dir, "ca.crt"), files.caCert, { mode: 0o644 });
  writeSecret(join(dir, "serving.key"), files.servingKey);
  writeFileAtomic(join(dir, "serving.crt"), files.servingCert, { mode: 0o644 });
}

/** Writes the serving certificate and key into `<dataDir>/tls` (the replicas' shared pair). */
export function writeServing(dataDir: string, pair: { cert: string; key: string }): void {
  const dir = join(dataDir, "tls");
  writeSecret(join(dir, "serving.key"), pair.key);
  writeFileAtomic(join(dir, "serving.crt"), pair.cert, { mode: 0o644 });
}

/** The hub's own CA and serving certificate in `<dataDir>/tls`, made or renewed as needed;
 * `servingLifetimeMs`: how long a new serving certificate is valid (default 1 year). */
export function ownTls(
  dataDir: string,
  sans: string[],
  now: number,
  servingLifetimeMs = SERVING_LIFETIME,
): HubTls & { renewed: boolean } {
  const dir = join(dataDir, "tls");
  if (!existsSync(dir)) mkdirSync(dir, { recursive: true, mode: 0o700 });
  const caCert = join(dir, "ca.crt");
  const caKey = join(dir, "ca.key");
  if (!existsSync(caCert) || !existsSync(caKey)) {
    const ca = newCa(now);
    writeSecret(caKey, ca.keyPem);
    writeFileAtomic(caCert, ca.certPem, { mode: 0o644 });
  }
  const caPem = readFileSync(caCert, "utf8");
  const servingCert = join(dir, "serving.crt");
  const servingKey = join(dir, "serving.key");
  let renewed = false;
  const before = renewBefore(servingLifetimeMs);
  if (!servingUsable(servingCert, servingKey, sans, now, before)) {
    const serving = newServing(caPem, readFileSync(caKey, "utf8"), sans, now, servingLifetimeMs);
    writeSecret(servingKey, serving.keyPem);
    writeFileAtomic(servingCert, serving.certPem, { mode: 0o644 });
    renewed = true;
  }
  return {
    cert: readFileSync(servingCert, "utf8"),
    key: readFileSync(servingKey, "utf8"),
    caPem,
    caHash: caHash(caPem),
    renewed,
  };
}

/** The operator's certificate and key (and CA, when named). */
export function givenTls(files: { certFile: string; keyFile: string; caFile?: string }): HubTls {
  const read = (f: string, what: string) => {
    try {
      return readFileSync(f, "utf8");
    } catch (err) {
      throw new Error(`cannot read the hub's TLS ${what} ${f}: ${(err as Error).message}`);
    }
  };
  const tls: HubTls = {
    cert: read(files.certFile, "certificate"),
    key: read(files.keyFile, "key"),
  };
  if (files.caFile !== undefined) {
    tls.caPem = read(files.caFile, "CA");
    tls.caHash = caHash(tls.caPem);
  }
  return tls;
}
