// Properties of device health: the hub's decoder gives a health message that round-trips and
// keeps its bounds, or refuses it as malformed naming the field; and whatever a board's /proc and
// /sys files hold, the agent's collector never throws and what it reads always passes the hub's
// schema (so a device is never cut off for reporting its health).
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import fc from "fast-check";
import { collectHealth } from "../../../src/agent/health/collect.ts";
import { deviceHealthSchema } from "../../../src/protocol/health.ts";
import { decodeAgentMessage } from "../../../src/protocol/index.ts";
import { fuzz } from "../../lib/fuzz.ts";
import { brokenText, type Json, nearValidText } from "./json-mutations.ts";

const bytes = fc.nat({ max: 2 ** 40 });
const validHealth: fc.Arbitrary<Json> = fc.record({
  type: fc.constant("health"),
  health: fc.record(
    {
      collectedAt: fc.nat(),
      bootTime: fc.nat(),
      uptimeSeconds: fc.double({ min: 0, max: 1e9, noNaN: true }),
      load: fc.tuple(fc.nat(50), fc.nat(50), fc.nat(50)),
      temperatures: fc.array(
        fc.record({
          zone: fc.string({ minLength: 1 }),
          type: fc.string(),
          celsius: fc.integer({ min: -40, max: 120 }),
        }),
        { maxLength: 3 },
      ),
      throttled: fc.record({
        raw: fc.nat(0xfffff),
        flags: fc.array(fc.constantFrom("throttled", "under-voltage")),
      }),
      filesystems: fc.array(
        fc.record({
          mountpoint: fc.string({ minLength: 1 }),
          device: fc.string(),
          fsType: fc.constantFrom("ext4", "vfat"),
          totalBytes: bytes,
          usedBytes: bytes,
          availableBytes: bytes,
        }),
        { maxLength: 3 },
      ),
      storage: fc.array(
        fc.record({
          device: fc.constantFrom("mmcblk0"),
          lifeUsedPercent: fc.nat(110),
          preEol: fc.constantFrom("normal", "urgent"),
        }),
        { maxLength: 1 },
      ),
      interfaces: fc.array(
        fc.record({
          name: fc.string({ minLength: 1 }),
          state: fc.constantFrom("up", "down"),
          addresses: fc.array(fc.constantFrom("10.0.0.2/24", "fe80::1/64"), { maxLength: 2 }),
          rxBytes: bytes,
          txBytes: bytes,
        }),
        { maxLength: 3 },
      ),
    },
    { requiredKeys: ["collectedAt", "temperatures", "filesystems", "interfaces"] },
  ),
}) as fc.Arbitrary<Json>;

describe("health message decoding under hostile frames", () => {
  test("gives a health message that round-trips within its bounds, or a malformed refusal naming the field", async () => {
    await fuzz(
      "device-health decode",
      fc.oneof(
        { weight: 4, arbitrary: nearValidText(validHealth) },
        { weight: 1, arbitrary: brokenText(validHealth) },
      ),
      (text) => {
        const d = decodeAgentMessage(text);
        if (d.ok) {
          expect(decodeAgentMessage(JSON.stringify(d.message))).toEqual(d);
          if (d.message.type === "health") {
            expect(d.message.health.temperatures.length).toBeLessThanOrEqual(64);
            expect(d.message.health.interfaces.length).toBeLessThanOrEqual(64);
          }
          return;
        }
        expect(["malformed", "unknown-type", "too-large"]).toContain(d.code);
        if (d.type === "health") expect(d.reason).toStartWith("bad health message: ");
        expect(d.reason.length).toBeLessThan(2048);
      },
      { seed: 30_951, runs: 600 },
    );
  });
});

const root = mkdtempSync(join(tmpdir(), "health-fuzz-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const FILES = [
  "proc/loadavg",
  "proc/uptime",
  "proc/stat",
  "proc/self/mountinfo",
  "sys/class/thermal/thermal_zone0/temp",
  "sys/class/thermal/thermal_zone0/type",
  "sys/devices/platform/soc/soc:firmware/get_throttled",
  "sys/block/mmcblk0/device/life_time",
  "sys/block/mmcblk0/device/pre_eol_info",
  "sys/class/net/eth0/operstate",
  "sys/class/net/eth0/statistics/rx_bytes",
];

/** A file's text: random, or a near-valid number or line. */
const content = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.double().map(String),
  fc.bigInt().map((n) => `${n}\n`),
  fc.constantFrom(
    "0x50005\n",
    "0x0b 0x0c\n",
    "btime 99999999999999999999\n",
    "-5 -1 1e400\n",
    "1 2 3 4 / / rw - ext4 x rw\n",
  ),
);

describe("the health collector over any file contents", () => {
  test("never throws and always reads what the hub's schema accepts", async () => {
    await fuzz(
      "device-health collector",
      fc.tuple(
        fc.array(content, { minLength: FILES.length, maxLength: FILES.length }),
        fc.nat(2 ** 52),
      ),
      ([texts, now]) => {
        FILES.forEach((f, i) => {
          mkdirSync(dirname(join(root, f)), { recursive: true });
          writeFileSync(join(root, f), texts[i] ?? "");
        });
        const h = collectHealth(
          {
            root,
            paths: ["/x"],
            statfs: () => ({ bsize: 4096, blocks: now % 1000, bfree: now % 7, bavail: now % 5 }),
            addresses: () => new Map([["eth0", ["10.0.0.2/24"]]]),
          },
          now,
        );
        const parsed = deviceHealthSchema.safeParse(h);
        if (!parsed.success)
          throw new Error(
            `refused: ${JSON.stringify(parsed.error.issues[0])} for ${JSON.stringify(h)}`,
          );
      },
      { seed: 30_952, runs: 300 },
    );
  });
});
