// Properties of signed release manifests: no change of a single byte in the signed part of a
// manifest passes verification (it is refused as malformed or as a bad signature), and the
// parser, given any text or bytes, returns a manifest whose values pass its own checks or throws
// its own ManifestError, nothing else.
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import {
  generateReleaseKeys,
  type PublicKey,
  parsePublicKey,
  readPrivateKey,
  signRelease,
} from "../../../src/release/keys.ts";
import {
  ManifestError,
  parseManifest,
  type ReleaseFields,
  serializeManifest,
} from "../../../src/release/manifest.ts";
import { ReleaseCheckError, verifyManifest } from "../../../src/release/verify.ts";
import { fuzz, fuzzTimeout } from "../../lib/fuzz.ts";

const TIMEOUT = fuzzTimeout(60_000);

const fields: fc.Arbitrary<ReleaseFields> = fc.record({
  version: fc.stringMatching(/^[0-9A-Za-z][0-9A-Za-z.+-]{0,20}$/),
  arch: fc.constantFrom("amd64" as const, "arm64" as const),
  size: fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
  sha256: fc.stringMatching(/^[0-9a-f]{64}$/),
});

let signer: { key: CryptoKey; pub: PublicKey } | undefined;
async function keys() {
  if (signer === undefined) {
    const k = await generateReleaseKeys();
    signer = { key: await readPrivateKey(k.privatePem), pub: await parsePublicKey(k.publicLine) };
  }
  return signer;
}

/** Parses, and checks that what comes back is what the format allows. */
function parseChecked(input: string | Uint8Array): void {
  try {
    const m = parseManifest(input);
    expect(m.signature.length).toBe(64);
    expect(serializeManifest(m)).toBe(
      typeof input === "string" ? input.replace(/\n?$/, "\n") : serializeManifest(m),
    );
  } catch (err) {
    if (!(err instanceof ManifestError)) throw err;
  }
}

describe("release manifests (properties)", () => {
  test(
    "any single-byte change in the signed part fails verification",
    async () => {
      const { key, pub } = await keys();
      const change = fc.record({
        fields,
        at: fc.nat(),
        byte: fc.integer({ min: 1, max: 255 }),
      });
      await fuzz(
        "release-manifest.one-byte",
        change,
        async ({ fields: f, at, byte }) => {
          const { text } = await signRelease(key, f);
          const bytes = new TextEncoder().encode(text);
          const signedLength = text.indexOf("signature: ");
          const i = at % signedLength;
          bytes[i] = (bytes[i] ?? 0) ^ byte;
          try {
            await verifyManifest(bytes, [pub]);
          } catch (err) {
            if (!(err instanceof ReleaseCheckError)) throw err;
            expect(["malformed", "signature"]).toContain(err.reason);
            return;
          }
          throw new Error(`byte ${i} changed and the manifest still verified`);
        },
        { seed: 31_401, runs: 300 },
      );
    },
    TIMEOUT,
  );

  test(
    "the parser gives a manifest or a ManifestError for any text, any bytes and any edited manifest",
    async () => {
      const { key } = await keys();
      const valid = (
        await signRelease(key, {
          version: "0.2.0",
          arch: "amd64",
          size: 1,
          sha256: "0".repeat(64),
        })
      ).text;
      const edited = fc
        .record({ at: fc.nat(), cut: fc.nat({ max: 8 }), insert: fc.string({ maxLength: 8 }) })
        .map(({ at, cut, insert }) => {
          const i = at % (valid.length + 1);
          return valid.slice(0, i) + insert + valid.slice(i + cut);
        });
      const inputs = fc.oneof(
        fc.string({ maxLength: 400 }),
        fc.string({ unit: "binary", maxLength: 200 }),
        fc.uint8Array({ maxLength: 400 }),
        edited,
      );
      await fuzz("release-manifest.parse", inputs, parseChecked, { seed: 31_402, runs: 1000 });
    },
    TIMEOUT,
  );
});
