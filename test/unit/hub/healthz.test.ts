import { describe, expect, test } from "bun:test";
import { healthz, isHealthPath } from "../../../src/hub/healthz.ts";

describe("the hub's health paths", () => {
  test("/livez, /readyz and /healthz are health paths; others are not", () => {
    for (const p of ["/livez", "/readyz", "/healthz"]) expect(isHealthPath(p)).toBe(true);
    for (const p of ["/", "/healthz/", "/api/v1/nodes", "/readyz/store"])
      expect(isHealthPath(p)).toBe(false);
  });

  test("a store whose last flush worked: every path answers 200 ok", async () => {
    for (const p of ["/livez", "/readyz", "/healthz"]) {
      const res = healthz(p, { failedFlushes: 2 });
      expect(res.status).toBe(200);
      expect(await res.text()).toBe("ok\n");
    }
  });

  test("a store whose writes fail: /readyz and /healthz say since when; /livez stays ok", async () => {
    const since = Date.UTC(2026, 11, 6, 19, 40, 0);
    const store = { failedFlushes: 3, failingSince: since, lastError: "disk I/O error" };
    for (const p of ["/readyz", "/healthz"]) {
      const res = healthz(p, store);
      expect(res.status).toBe(503);
      const body = await res.text();
      expect(body).toContain("store: writes failing since 2026-12-06T19:40:00Z (3 failed flushes)");
      expect(body).not.toContain("disk I/O error");
    }
    expect(healthz("/livez", store).status).toBe(200);
  });
});
