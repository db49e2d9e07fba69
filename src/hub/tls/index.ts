// The hub's TLS material (docs/protocol.md, "TLS and trust"): the operator's certificate and key
// when given, else the hub's own CA and a serving certificate in <data>/tls, made on first start
// and made again (same CA) when the serving certificate nears expiry or its names no longer
// cover the wanted ones.
import { createPrivateKey, createPublicKey, X509Certificate } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { isIP } from "node:net";
import { hostname, networkInterfaces } from "node:os";
import { join } from "node:path";
import { caHash } from "../../protocol/trust.ts";
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

function writeSecret(path: string, text: string): void {
  writeFileSync(path, text, { mode: 0o600 });
  chmodSync(path, 0o600);
}

/** A name or address in one comparable form (addresses as bytes: "::1" = "0:0:0:0:0:0:0:1"). */
function sanKey(s: string): string {
  return isIP(s) !== 0 ? ipBytes(s).toString("hex") : s.toLowerCase();
}

/** Whether the serving certificate at `path` is valid from the epoch (a hub made before the
 * backdating remakes it) past `now` + 30 days for every name. */
function servingUsable(path: string, sans: string[], now: number): boolean {
  if (!existsSync(path)) return false;
  const cert = new X509Certificate(readFileSync(path));
  if (Date.parse(cert.validTo) - now < RENEW_BEFORE) return false;
  if (Date.parse(cert.validFrom) > OWN_NOT_BEFORE) return false;
  const have = new Set(
    (cert.subjectAltName ?? "").split(", ").map((s) => sanKey(s.replace(/^(DNS|IP Address):/, ""))),
  );
  return sans.every((s) => have.has(sanKey(s)));
}

/** The hub's own CA and serving certificate in `<dataDir>/tls`, made or renewed as needed. */
export function ownTls(
  dataDir: string,
  sans: string[],
  now: number,
): HubTls & { renewed: boolean } {
  const dir = join(dataDir, "tls");
  if (!existsSync(dir)) mkdirSync(dir, { recursive: true, mode: 0o700 });
  const caCert = join(dir, "ca.crt");
  const caKey = join(dir, "ca.key");
  if (!existsSync(caCert) || !existsSync(caKey)) {
    const ca = issue({
      commonName: `fleetlet-hub-ca@${Math.floor(now / 1000)}`,
      notBefore: OWN_NOT_BEFORE,
      notAfter: now + CA_LIFETIME,
    });
    writeSecret(caKey, ca.keyPem);
    writeFileSync(caCert, ca.certPem, { mode: 0o644 });
  }
  const caPem = readFileSync(caCert, "utf8");
  const servingCert = join(dir, "serving.crt");
  const servingKey = join(dir, "serving.key");
  let renewed = false;
  if (!servingUsable(servingCert, sans, now) || !existsSync(servingKey)) {
    const key = createPrivateKey(readFileSync(caKey));
    const serving = issue({
      commonName: "fleetlet-hub",
      notBefore: OWN_NOT_BEFORE,
      notAfter: Math.min(now + SERVING_LIFETIME, Date.parse(new X509Certificate(caPem).validTo)),
      sans,
      issuer: {
        commonName: new X509Certificate(caPem).subject.replace(/^.*CN=/s, "").trim(),
        key,
        publicKey: createPublicKey(key),
      },
    });
    writeSecret(servingKey, serving.keyPem);
    writeFileSync(servingCert, serving.certPem, { mode: 0o644 });
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
