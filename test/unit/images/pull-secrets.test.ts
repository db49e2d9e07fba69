import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createImageManager, podPullCredentials } from "../../../src/agent/images/index.ts";
import type { Secret } from "../../../src/api/index.ts";
import { createFakeRuntime, type PullImageRequest } from "../../../src/cri/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";

const dir = mkdtempSync(join(tmpdir(), "fleetlet-pull-secrets-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const b64 = (s: string) => Buffer.from(s).toString("base64");
const REG = "127.0.0.1:5055";
function dockerSecret(
  name: string,
  user: string,
  password: string,
  type = "kubernetes.io/dockerconfigjson",
): Secret {
  const auths = { [REG]: { auth: b64(`${user}:${password}`) } };
  const data: Record<string, string> =
    type === "kubernetes.io/dockercfg"
      ? { ".dockercfg": b64(JSON.stringify(auths)) }
      : { ".dockerconfigjson": b64(JSON.stringify({ auths })) };
  return { apiVersion: "v1", kind: "Secret", metadata: { name, namespace: "default" }, type, data };
}
const secrets = new Map<string, Secret>([
  ["good", dockerSecret("good", "edge", "s3cret")],
  ["wrong", dockerSecret("wrong", "edge", "nope")],
  ["legacy", dockerSecret("legacy", "edge", "s3cret", "kubernetes.io/dockercfg")],
  [
    "opaque",
    {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "opaque" },
      type: "Opaque",
      data: { a: b64("b") },
    },
  ],
]);
const lookup = (_ns: string, name: string) => secrets.get(name);
const podWith = (...names: string[]) =>
  makePod({
    containers: [makeContainer({ image: `${REG}/private:v1` })],
    spec: { containers: [], imagePullSecrets: names.map((name) => ({ name })) },
  });

describe("podPullCredentials()", () => {
  test("reads dockerconfigjson and dockercfg Secrets in order, and names the missing ones", () => {
    const got = podPullCredentials(podWith("legacy", "missing", "opaque", "good"), lookup);
    expect(got.missing).toEqual(["missing"]);
    expect(got.credentials.map((c) => [c.key, c.auth.username, c.auth.password])).toEqual([
      [REG, "edge", "s3cret"],
      [REG, "edge", "s3cret"],
    ]);
  });
});

describe("pulls with a pod's imagePullSecrets", () => {
  function setup(credentialsPath?: string) {
    const clock = new FakeClock();
    const cri = createFakeRuntime({ now: () => clock.now() });
    cri.images.addToRegistry(`${REG}/private:v1`, {
      credentials: { username: "edge", password: "s3cret" },
    });
    const events: string[] = [];
    const images = createImageManager({
      cri,
      clock,
      logger: nullLogger,
      recorder: (_pod, type, reason, message) => events.push(`${type} ${reason}: ${message}`),
      backoff: { initialMs: 10_000, maxMs: 300_000 },
      podCredentials: (pod) => podPullCredentials(pod, lookup),
      ...(credentialsPath ? { credentialsPath } : {}),
    });
    const ensure = (pod: ReturnType<typeof podWith>) =>
      images.ensureImageExists(pod, pod.spec.containers[0] as never);
    const auths = () =>
      (cri.callsOf("pullImage") as PullImageRequest[]).map((r) => r.auth?.password ?? null);
    return { ensure, auths, events };
  }

  test("use the pod's Secret with no credentials on the node", async () => {
    const s = setup();
    expect((await s.ensure(podWith("good"))).ok).toBe(true);
    expect(s.auths()).toEqual(["s3cret"]);
  });

  test("try the pod's Secret before the node's docker config, and the node's when it fails", async () => {
    const path = join(dir, "config.json");
    writeFileSync(
      path,
      JSON.stringify({ auths: { [REG]: { username: "edge", password: "s3cret" } } }),
    );
    const s = setup(path);
    expect((await s.ensure(podWith("wrong"))).ok).toBe(true);
    expect(s.auths()).toEqual(["nope", "s3cret"]);
  });

  test("a missing Secret is a warning, and the pull goes on without it", async () => {
    const s = setup();
    const r = await s.ensure(podWith("missing"));
    expect(r).toMatchObject({ ok: false, reason: "ErrImagePull" });
    expect(s.auths()).toEqual([null]);
    expect(s.events).toContain(
      "Warning FailedToRetrieveImagePullSecret: Unable to retrieve some image pull secrets (missing); attempting to pull the image may not succeed.",
    );
  });
});
