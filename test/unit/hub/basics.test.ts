import { describe, expect, test } from "bun:test";
import { TokenBucket } from "../../../src/hub/ratelimit.ts";
import { bearerToken, generateToken, hashToken } from "../../../src/hub/tokens.ts";

describe("TokenBucket", () => {
  test("take() allows the burst at once, then refills at the rate", () => {
    const b = new TokenBucket({ messagesPerSecond: 10, burst: 3 }, 0);
    expect([b.take(0), b.take(0), b.take(0), b.take(0)]).toEqual([true, true, true, false]);
    expect(b.take(50)).toBe(false);
    expect(b.take(100)).toBe(true);
    expect(b.take(100)).toBe(false);
  });

  test("take() never holds more than the burst after a long pause", () => {
    const b = new TokenBucket({ messagesPerSecond: 10, burst: 2 }, 0);
    const results = [b.take(60_000), b.take(60_000), b.take(60_000)];
    expect(results).toEqual([true, true, false]);
  });
});

describe("tokens", () => {
  test("generateToken() prefixes the kind and carries 32 random bytes", () => {
    const t = generateToken("join", () => Buffer.alloc(32, 1));
    expect(t).toBe(`flj_${Buffer.alloc(32, 1).toString("base64url")}`);
    expect(generateToken("credential")).toStartWith("flc_");
    expect(generateToken("operator")).not.toBe(generateToken("operator"));
  });

  test("hashToken() is the hex SHA-256 and does not contain the token", () => {
    const h = hashToken("flc_secret");
    expect(h).toMatch(/^[0-9a-f]{64}$/);
    expect(h).toBe(hashToken("flc_secret"));
    expect(h).not.toBe(hashToken("flc_secreT"));
  });

  test("bearerToken() reads an Authorization header", () => {
    expect(bearerToken("Bearer abc")).toBe("abc");
    expect(bearerToken("bearer  abc ")).toBe("abc");
    expect(bearerToken("Basic abc")).toBeUndefined();
    expect(bearerToken(null)).toBeUndefined();
  });
});
