// X.509 certificates for the hub's own CA and its serving certificate (docs/protocol.md, "TLS and
// trust"): ECDSA P-256 keys, signed with ECDSA-SHA256, with the extensions TLS clients check
// (basic constraints, key usage, extended key usage, key identifiers, subjectAltName).
import { createHash, generateKeyPairSync, type KeyObject, randomBytes, sign } from "node:crypto";
import { isIP } from "node:net";
import {
  bitString,
  boolean,
  context,
  integer,
  octetString,
  oid,
  sequence,
  set,
  time,
  utf8String,
} from "./der.ts";

const OID = {
  ecdsaWithSha256: "1.2.840.10045.4.3.2",
  commonName: "2.5.4.3",
  organization: "2.5.4.10",
  subjectKeyId: "2.5.29.14",
  keyUsage: "2.5.29.15",
  subjectAltName: "2.5.29.17",
  basicConstraints: "2.5.29.19",
  authorityKeyId: "2.5.29.35",
  extKeyUsage: "2.5.29.37",
  serverAuth: "1.3.6.1.5.5.7.3.1",
};

/** A key pair and its certificate, as PEM. */
export interface Issued {
  certPem: string;
  keyPem: string;
}

export interface CertSpec {
  commonName: string;
  notBefore: number;
  notAfter: number;
  /** For a serving certificate: DNS names and IP addresses. */
  sans?: string[];
  /** Absent: self-signed CA. */
  issuer?: { commonName: string; key: KeyObject; publicKey: KeyObject };
}

function name(commonName: string): Buffer {
  return sequence(
    set(sequence(oid(OID.organization), utf8String("fleetlet"))),
    set(sequence(oid(OID.commonName), utf8String(commonName))),
  );
}

function extension(id: string, critical: boolean, value: Buffer): Buffer {
  return sequence(oid(id), ...(critical ? [boolean(true)] : []), octetString(value));
}

/** The key identifier of a public key: SHA-1 of its subjectPublicKey bits (RFC 5280 4.2.1.2). */
function keyId(publicKey: KeyObject): Buffer {
  const spki = publicKey.export({ type: "spki", format: "der" });
  // The SPKI of a P-256 key ends with the 65-byte uncompressed point.
  return createHash("sha1")
    .update(spki.subarray(spki.length - 65))
    .digest();
}

/** An IP address's bytes for a subjectAltName. */
export function ipBytes(ip: string): Buffer {
  if (isIP(ip) === 4) return Buffer.from(ip.split(".").map(Number));
  const [head = "", tail = ""] = ip.split("::");
  const words = (s: string) => (s === "" ? [] : s.split(":").map((w) => Number.parseInt(w, 16)));
  const h = words(head);
  const t = ip.includes("::") ? words(tail) : [];
  const all = [...h, ...new Array(8 - h.length - t.length).fill(0), ...t];
  const out = Buffer.alloc(16);
  for (const [i, w] of all.entries()) out.writeUInt16BE(w, i * 2);
  return out;
}

function altNames(sans: string[]): Buffer {
  return sequence(
    ...sans.map((s) =>
      isIP(s) !== 0 ? context(7, ipBytes(s), false) : context(2, Buffer.from(s, "ascii"), false),
    ),
  );
}

function extensions(spec: CertSpec, publicKey: KeyObject): Buffer[] {
  const isCa = spec.issuer === undefined;
  const exts = [
    extension(OID.basicConstraints, true, sequence(...(isCa ? [boolean(true)] : []))),
    // CA: digitalSignature, keyCertSign, cRLSign; serving: digitalSignature.
    extension(
      OID.keyUsage,
      true,
      isCa ? bitString(Buffer.from([0x86]), 1) : bitString(Buffer.from([0x80]), 7),
    ),
    extension(OID.subjectKeyId, false, octetString(keyId(publicKey))),
  ];
  if (spec.issuer !== undefined) {
    exts.push(
      extension(OID.extKeyUsage, false, sequence(oid(OID.serverAuth))),
      extension(
        OID.authorityKeyId,
        false,
        sequence(context(0, keyId(spec.issuer.publicKey), false)),
      ),
    );
  }
  if (spec.sans !== undefined && spec.sans.length > 0)
    exts.push(extension(OID.subjectAltName, false, altNames(spec.sans)));
  return exts;
}

function pem(label: string, der: Buffer): string {
  const b64 = der.toString("base64").replace(/(.{64})/g, "$1\n");
  return `-----BEGIN ${label}-----\n${b64.replace(/\n$/, "")}\n-----END ${label}-----\n`;
}

/** Makes a new P-256 key and a certificate for it (self-signed when `spec.issuer` is absent). */
export function issue(spec: CertSpec): Issued & { key: KeyObject; publicKey: KeyObject } {
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const algorithm = sequence(oid(OID.ecdsaWithSha256));
  const serial = randomBytes(16);
  serial[0] = (serial[0] ?? 0) & 0x7f;
  const tbs = sequence(
    context(0, integer(Buffer.from([2])), true),
    integer(serial),
    algorithm,
    name(spec.issuer?.commonName ?? spec.commonName),
    sequence(time(spec.notBefore), time(spec.notAfter)),
    name(spec.commonName),
    publicKey.export({ type: "spki", format: "der" }),
    context(3, sequence(...extensions(spec, publicKey)), true),
  );
  const signature = sign("sha256", tbs, spec.issuer?.key ?? privateKey);
  const cert = sequence(tbs, algorithm, bitString(signature));
  return {
    certPem: pem("CERTIFICATE", cert),
    keyPem: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
    key: privateKey,
    publicKey,
  };
}
