// The AuthConfig that PullImage gets from a docker config.json must be one containerd accepts:
// its CRI parses a non-empty serverAddress as a URL and only uses the credential when that URL's
// host is the host being pulled from, so a bare "host:port" key failed every pull and a
// "docker.io" key was silently ignored. The credential is sent without a serverAddress.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  createImageManager,
  findCredential,
  parseDockerConfig,
  parseImageReference,
} from "../../../src/agent/images/index.ts";
import { createFakeRuntime, type PullImageRequest } from "../../../src/cri/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";

const dir = mkdtempSync(join(tmpdir(), "fleetlet-credentials-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const config = {
  auths: {
    "127.0.0.1:5056": { auth: btoa("edge:s3cret") },
    "https://index.docker.io/v1/": { username: "hub", password: "hubpw" },
    "registry.example:5000/team": { identitytoken: "tok" },
  },
};

describe("credentials sent to PullImage", () => {
  test("carry no serverAddress, whatever form the config.json key has", () => {
    const creds = parseDockerConfig(JSON.stringify(config));
    expect(creds).toHaveLength(3);
    for (const c of creds) expect(c.auth.serverAddress).toBeUndefined();
    const find = (ref: string) => findCredential(creds, parseImageReference(ref));
    expect(find("127.0.0.1:5056/app:v1")).toEqual({
      username: "edge",
      password: "s3cret",
      auth: btoa("edge:s3cret"),
    });
    expect(find("busybox")).toEqual({ username: "hub", password: "hubpw" });
    expect(find("registry.example:5000/team/app")).toEqual({ identityToken: "tok" });
  });

  test("the image manager's PullImage request for a host:port registry", async () => {
    const path = join(dir, "config.json");
    writeFileSync(path, JSON.stringify(config));
    const clock = new FakeClock();
    const cri = createFakeRuntime({ now: () => clock.now() });
    cri.images.addToRegistry("127.0.0.1:5056/private:v1", {
      credentials: { username: "edge", password: "s3cret" },
    });
    const images = createImageManager({
      cri,
      clock,
      logger: nullLogger,
      recorder: () => {},
      backoff: { initialMs: 10_000, maxMs: 300_000 },
      credentialsPath: path,
    });
    const r = await images.ensureImageExists(
      makePod(),
      makeContainer({ image: "127.0.0.1:5056/private:v1" }),
    );
    expect(r.ok).toBe(true);
    const auth = (cri.callsOf("pullImage") as PullImageRequest[])[0]?.auth;
    expect(auth).toMatchObject({ username: "edge", password: "s3cret" });
    expect(auth?.serverAddress).toBeUndefined();
  });
});
