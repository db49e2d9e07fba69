import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  createImageManager,
  findCredential,
  formatElapsed,
  parseDockerConfig,
  parseImageReference,
} from "../../../src/agent/images/index.ts";
import type { Container, PullPolicy } from "../../../src/api/types.ts";
import { createFakeRuntime, type PullImageRequest } from "../../../src/cri/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";

const dir = mkdtempSync(join(tmpdir(), "fleetlet-images-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function setup(credentialsPath?: string) {
  const clock = new FakeClock();
  const cri = createFakeRuntime({ now: () => clock.now() });
  const events: { reason: string; message: string; type: string }[] = [];
  const images = createImageManager({
    cri,
    clock,
    logger: nullLogger,
    recorder: (_pod, type, reason, message) => events.push({ type, reason, message }),
    backoff: { initialMs: 10_000, maxMs: 300_000 },
    ...(credentialsPath ? { credentialsPath } : {}),
  });
  const pod = makePod();
  const ensure = (c: Partial<Container>) => images.ensureImageExists(pod, makeContainer(c));
  return { clock, cri, events, images, ensure };
}

describe("parseImageReference()", () => {
  const cases: [string, string][] = [
    ["busybox", "docker.io/library/busybox:latest"],
    ["busybox:1.36", "docker.io/library/busybox:1.36"],
    ["team/app", "docker.io/team/app:latest"],
    ["127.0.0.1:5055/fleetlet-test/busybox:v1", "127.0.0.1:5055/fleetlet-test/busybox:v1"],
    ["localhost/app", "localhost/app:latest"],
    [`app@sha256:${"a".repeat(64)}`, `docker.io/library/app@sha256:${"a".repeat(64)}`],
  ];
  for (const [ref, normalized] of cases) {
    test(`normalizes ${ref}`, () => expect(parseImageReference(ref).normalized).toBe(normalized));
  }
  for (const bad of [
    "",
    "Busybox",
    "busybox:",
    "a b",
    "busybox:bad*tag",
    "host:port/x",
    "x@sha256:12",
  ]) {
    test(`refuses ${JSON.stringify(bad)}`, () =>
      expect(() => parseImageReference(bad)).toThrow(/couldn't parse image name/));
  }
});

describe("ensureImageExists() pull policy", () => {
  const cases: [PullPolicy, boolean, "pull" | "present" | "ErrImageNeverPull"][] = [
    ["Always", true, "pull"],
    ["Always", false, "pull"],
    ["IfNotPresent", true, "present"],
    ["IfNotPresent", false, "pull"],
    ["Never", true, "present"],
    ["Never", false, "ErrImageNeverPull"],
  ];
  for (const [policy, present, outcome] of cases) {
    test(`${policy} with the image ${present ? "present" : "absent"}: ${outcome}`, async () => {
      const s = setup();
      if (present) s.cri.images.add("busybox:1.36");
      s.cri.images.addToRegistry("busybox:1.36");
      const r = await s.ensure({ image: "busybox:1.36", imagePullPolicy: policy });
      expect(s.cri.callsOf("pullImage")).toHaveLength(outcome === "pull" ? 1 : 0);
      if (outcome === "ErrImageNeverPull") {
        expect(r).toEqual({
          ok: false,
          reason: "ErrImageNeverPull",
          message: 'Container image "busybox:1.36" is not present with pull policy of Never',
        });
      } else {
        expect(r.ok).toBe(true);
        expect(s.events.at(-1)?.reason).toBe("Pulled");
      }
    });
  }

  test("reports how long a pull took", async () => {
    const s = setup();
    s.cri.images.addToRegistry("busybox:1.36");
    await s.ensure({ image: "busybox:1.36" });
    expect(s.events.map((e) => e.reason)).toEqual(["Pulling", "Pulled"]);
    expect(s.events[1]?.message).toMatch(
      /^Successfully pulled image "busybox:1\.36" in 0s \(0s including waiting\)\. Image size: \d+ bytes\.$/,
    );
  });

  const spans: [number, string][] = [
    [0, "0s"],
    [0.7, "0s"],
    [450.9, "450ms"],
    [1000, "1s"],
    [1234.9, "1.234s"],
    [1034, "1.034s"],
    [120_000, "2m0s"],
    [125_500, "2m5.5s"],
    [3_602_000, "1h0m2s"],
  ];
  for (const [ms, text] of spans) {
    test(`formatElapsed() writes ${ms} ms as Go prints a duration cut to ms: ${text}`, () =>
      expect(formatElapsed(ms)).toBe(text));
  }

  test("reports InvalidImageName for a reference that does not parse", async () => {
    const s = setup();
    const r = await s.ensure({ image: "Bad/Name", imagePullPolicy: "IfNotPresent" });
    expect(r).toMatchObject({ ok: false, reason: "InvalidImageName" });
    expect(s.events[0]?.reason).toBe("InspectFailed");
  });
});

describe("ensureImageExists() pull back-off", () => {
  test("goes ErrImagePull, then ImagePullBackOff until the doubling delay has passed", async () => {
    const s = setup();
    const missing = { image: "127.0.0.1:5055/none:v1", imagePullPolicy: "IfNotPresent" as const };
    const r1 = await s.ensure(missing);
    expect(r1).toMatchObject({ ok: false, reason: "ErrImagePull" });
    expect(s.events.at(-1)).toMatchObject({ type: "Warning", reason: "Failed" });
    // The waiting message says why the last pull failed; the BackOff event does not.
    expect(await s.ensure(missing)).toEqual({
      ok: false,
      reason: "ImagePullBackOff",
      message: `Back-off pulling image "127.0.0.1:5055/none:v1": ErrImagePull: ${r1.ok ? "" : r1.message}`,
    });
    expect(s.events.at(-1)).toMatchObject({
      reason: "BackOff",
      message: 'Back-off pulling image "127.0.0.1:5055/none:v1"',
    });
    s.clock.step(10_000);
    expect(await s.ensure(missing)).toMatchObject({ reason: "ErrImagePull" });
    s.clock.step(10_000);
    expect(await s.ensure(missing)).toMatchObject({ reason: "ImagePullBackOff" });
    s.clock.step(10_000);
    expect(await s.ensure(missing)).toMatchObject({ reason: "ErrImagePull" });
    expect(s.cri.callsOf("pullImage")).toHaveLength(3);
  });

  test.each([
    ["back", -86_400_000],
    ["forward", 86_400_000],
  ])("a wall step %s of a day neither holds nor ends the back-off", async (_d, step) => {
    const s = setup();
    const missing = { image: "127.0.0.1:5055/none:v1", imagePullPolicy: "IfNotPresent" as const };
    await s.ensure(missing);
    s.clock.stepWall(step);
    s.clock.step(9_999);
    expect(await s.ensure(missing)).toMatchObject({ reason: "ImagePullBackOff" });
    s.clock.step(1);
    expect(await s.ensure(missing)).toMatchObject({ reason: "ErrImagePull" });
  });
});

describe("registry credentials", () => {
  const config = JSON.stringify({
    auths: {
      "https://index.docker.io/v1/": { auth: btoa("hub:hubpw") },
      "127.0.0.1:5055": { username: "edge", password: "s3cret" },
      "127.0.0.1:5055/team": { auth: btoa("team:teampw") },
    },
  });

  test("match by registry host and the longest repository prefix", () => {
    const creds = parseDockerConfig(config);
    const find = (ref: string) => findCredential(creds, parseImageReference(ref));
    expect(find("busybox")).toMatchObject({ username: "hub", password: "hubpw" });
    expect(find("127.0.0.1:5055/app:v1")).toMatchObject({ username: "edge", password: "s3cret" });
    expect(find("127.0.0.1:5055/team/app:v1")).toMatchObject({
      username: "team",
      password: "teampw",
    });
    expect(find("registry.k8s.io/pause:3.6")).toBeUndefined();
  });

  test("are passed to PullImage from the docker config.json", async () => {
    const path = join(dir, "config.json");
    writeFileSync(path, config);
    const s = setup(path);
    s.cri.images.addToRegistry("127.0.0.1:5055/private:v1", {
      credentials: { username: "edge", password: "s3cret" },
    });
    const r = await s.ensure({ image: "127.0.0.1:5055/private:v1" });
    expect(r.ok).toBe(true);
    expect((s.cri.callsOf("pullImage") as PullImageRequest[])[0]?.auth).toMatchObject({
      username: "edge",
      password: "s3cret",
    });
  });

  test("a missing credentials file means anonymous pulls", async () => {
    const s = setup(join(dir, "absent.json"));
    s.cri.images.addToRegistry("busybox:1.36");
    expect((await s.ensure({ image: "busybox:1.36" })).ok).toBe(true);
  });
});
