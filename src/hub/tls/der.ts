// A small DER writer: just the ASN.1 types an X.509 certificate needs (certs.ts). Each function
// returns the complete encoding (tag, length, content) of one value.

function length(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

/** One value: `tag`, its length and `content`. */
function tlv(tag: number, content: Buffer): Buffer {
  return Buffer.concat([Buffer.from([tag]), length(content.length), content]);
}

export const sequence = (...items: Buffer[]): Buffer => tlv(0x30, Buffer.concat(items));
export const set = (...items: Buffer[]): Buffer => tlv(0x31, Buffer.concat(items));
export const octetString = (b: Buffer): Buffer => tlv(0x04, b);
export const utf8String = (s: string): Buffer => tlv(0x0c, Buffer.from(s, "utf8"));
export const boolean = (v: boolean): Buffer => tlv(0x01, Buffer.from([v ? 0xff : 0]));

/** A non-negative INTEGER from its big-endian magnitude (a 0 byte is put first when needed). */
export function integer(magnitude: Buffer): Buffer {
  let i = 0;
  while (i < magnitude.length - 1 && magnitude[i] === 0) i++;
  const m = magnitude.subarray(i);
  return tlv(0x02, (m[0] ?? 0) & 0x80 ? Buffer.concat([Buffer.from([0]), m]) : m);
}

/** A BIT STRING of whole bytes with `unusedBits` unused at the end of the last one. */
export function bitString(bytes: Buffer, unusedBits = 0): Buffer {
  return tlv(0x03, Buffer.concat([Buffer.from([unusedBits]), bytes]));
}

/** An OBJECT IDENTIFIER from its dotted form, e.g. "2.5.4.3". */
export function oid(dotted: string): Buffer {
  const parts = dotted.split(".").map(Number);
  const [a = 0, b = 0, ...rest] = parts;
  const out: number[] = [a * 40 + b];
  for (const p of rest) {
    const chunk: number[] = [p & 0x7f];
    for (let v = Math.floor(p / 128); v > 0; v = Math.floor(v / 128))
      chunk.unshift(0x80 | (v & 0x7f));
    out.push(...chunk);
  }
  return tlv(0x06, Buffer.from(out));
}

/** A certificate time: UTCTime for 1950–2049, GeneralizedTime otherwise (RFC 5280). */
export function time(ms: number): Buffer {
  const iso = new Date(Math.floor(ms / 1000) * 1000).toISOString();
  const digits = iso.replace(/[-:T]/g, "").replace(/\.\d{3}Z$/, "Z");
  const year = Number(iso.slice(0, 4));
  if (year >= 1950 && year < 2050) return tlv(0x17, Buffer.from(digits.slice(2), "ascii"));
  return tlv(0x18, Buffer.from(digits, "ascii"));
}

/** A context-specific tag `n`, constructed ([n] EXPLICIT) or primitive ([n] IMPLICIT). */
export function context(n: number, content: Buffer, constructed: boolean): Buffer {
  return tlv((constructed ? 0xa0 : 0x80) | n, content);
}
