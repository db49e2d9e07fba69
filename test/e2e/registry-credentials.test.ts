// Registry credentials end to end: the compiled agent pulls a busybox image that only the test
// bed's password registry (htpasswd basic auth on loopback) serves, through containerd's CRI,
// with the docker config.json named by imagePullCredentialsFile. Before each pull the image is
// removed from containerd, so every case pulls for real.
// Needs root and the test bed (scripts/test starts both).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ContainerStatus, Event, Pod } from "../../src/api/types.ts";
import { createCriClient } from "../../src/cri/index.ts";
import { TestAgent } from "../lib/agent.ts";
import { sleeperManifest } from "../lib/manifests.ts";
import { eventually } from "../lib/testbed.ts";

const credsDir = mkdtempSync(join(tmpdir(), "fleetlet-e2e-creds-"));
const credsFile = join(credsDir, "config.json");
const agentConfig = join(credsDir, "agent.yaml");
writeFileSync(agentConfig, `imagePullCredentialsFile: ${credsFile}\n`);

/** No credentials at all. */
const anonymous = new TestAgent();
/** imagePullCredentialsFile set in its --config file; the file is written by each test. */
const withCreds = new TestAgent({ args: ["--config", agentConfig] });
const tb = withCreds.tb;
const image = tb.authBusybox;
const cri = createCriClient({ endpoint: tb.endpoint });

const basic = (user: string, password: string) =>
  Buffer.from(`${user}:${password}`).toString("base64");

/** Replaces the credentials file atomically (the agent reads it at every pull). */
function writeCredentials(doc: unknown): void {
  writeFileSync(`${credsFile}.tmp`, JSON.stringify(doc));
  renameSync(`${credsFile}.tmp`, credsFile);
}

const manifest = (name: string) => sleeperManifest(name, image);

const status = (pod: Pod): ContainerStatus | undefined =>
  pod.status?.containerStatuses?.find((c) => c.name === "c");

/** Every event message the tests read, checked at the end for the password. */
const seenMessages: string[] = [];

async function podEvents(agent: TestAgent, name: string): Promise<Event[]> {
  const sel = encodeURIComponent(`involvedObject.name=${name}-${agent.nodeName}`);
  const res = await agent.request(`/api/v1/namespaces/default/events?fieldSelector=${sel}`);
  const { items } = (await res.json()) as { items: Event[] };
  seenMessages.push(...items.map((e) => e.message));
  return items;
}

/** Removes the private image from containerd and checks it is gone, so the next pod must pull. */
async function removeImage(): Promise<void> {
  await cri.removeImage({ image: { image } });
  expect((await cri.imageStatus({ image: { image } })).image ?? null).toBeNull();
}

async function removePod(agent: TestAgent, name: string): Promise<void> {
  agent.removeManifest(`${name}.yaml`);
  await eventually(`pod ${name} to be gone`, async () => (await agent.pod(name)) === undefined);
}

/** Waits for ErrImagePull then ImagePullBackOff (through the pod watch, which sees every change
 * of the status), and returns the ErrImagePull message. */
async function waitRefused(agent: TestAgent, name: string): Promise<string> {
  const reasons: string[] = [];
  let message = "";
  await agent.watchPod(name, "to show ErrImagePull then ImagePullBackOff", (seen) => {
    const waiting = status(seen.at(-1) as Pod)?.state.waiting;
    if (waiting?.reason && reasons.at(-1) !== waiting.reason) reasons.push(waiting.reason);
    if (waiting?.reason === "ErrImagePull" && !message) message = waiting.message ?? "";
    return reasons.includes("ErrImagePull") && reasons.includes("ImagePullBackOff");
  });
  expect(reasons.indexOf("ErrImagePull")).toBeLessThan(reasons.indexOf("ImagePullBackOff"));
  return message;
}

async function waitRunning(agent: TestAgent, name: string): Promise<Pod> {
  const pod = await agent.waitPod(name, "Running", (p) => p.status?.phase === "Running");
  expect(status(pod)?.state.running).toBeDefined();
  const pulled = (await podEvents(agent, name)).find((e) => e.reason === "Pulled");
  expect(pulled?.message).toStartWith(`Successfully pulled image "${image}"`);
  expect((await cri.imageStatus({ image: { image } })).image?.repoTags).toContain(image);
  return pod;
}

beforeAll(async () => {
  await Promise.all([anonymous.start(), withCreds.start()]);
}, 30_000);
afterAll(async () => {
  await Promise.all([anonymous.cleanup(), withCreds.cleanup()]);
  await cri.removeImage({ image: { image } }).catch(() => {});
  cri.close();
  rmSync(credsDir, { recursive: true, force: true });
}, 60_000);

describe("pulling from a registry that wants a password (needs root and the test bed)", () => {
  test("without credentials the registry's refusal shows as ErrImagePull, then ImagePullBackOff", async () => {
    await removeImage();
    anonymous.writeManifest("anon.yaml", manifest("anon"));
    const message = await waitRefused(anonymous, "anon");
    expect(message).toContain("401 Unauthorized");
    const events = await podEvents(anonymous, "anon");
    const failed = events.find(
      (e) => e.reason === "Failed" && e.message.includes("Failed to pull"),
    );
    expect(failed?.type).toBe("Warning");
    expect(failed?.message).toContain(`Failed to pull image "${image}"`);
    expect(failed?.message).toContain("401 Unauthorized");
    expect(events.find((e) => e.reason === "BackOff")?.message).toBe(
      `Back-off pulling image "${image}"`,
    );
    await removePod(anonymous, "anon");
  }, 60_000);

  test("a wrong password is refused; fixing the file lets the same pod start, no restart", async () => {
    await removeImage();
    writeCredentials({ auths: { [tb.authRegistry]: { auth: basic(tb.authUser, "wrong") } } });
    withCreds.writeManifest("fixme.yaml", manifest("fixme"));
    expect(await waitRefused(withCreds, "fixme")).toContain("401 Unauthorized");
    const uid = (await withCreds.pod("fixme"))?.metadata.uid;
    // The docker config.json form: "auth" is base64 of "user:password".
    writeCredentials({
      auths: { [tb.authRegistry]: { auth: basic(tb.authUser, tb.authPassword) } },
    });
    const pod = await waitRunning(withCreds, "fixme");
    expect(pod.metadata.uid).toBe(uid);
    await removePod(withCreds, "fixme");
  }, 60_000);

  test("the username and password form, under an http:// key with a trailing slash", async () => {
    await removeImage();
    writeCredentials({
      auths: {
        "https://index.docker.io/v1/": { auth: basic("someone", "else") },
        [`http://${tb.authRegistry}/`]: { username: tb.authUser, password: tb.authPassword },
      },
    });
    withCreds.writeManifest("userpass.yaml", manifest("userpass"));
    await waitRunning(withCreds, "userpass");
    await removePod(withCreds, "userpass");
  }, 60_000);

  test("the password appears in no event and no log line of the agents", () => {
    expect(seenMessages.length).toBeGreaterThan(0);
    for (const m of seenMessages) expect(m).not.toContain(tb.authPassword);
    for (const out of [anonymous.output, withCreds.output]) {
      expect(out).not.toContain(tb.authPassword);
      expect(out).not.toContain(basic(tb.authUser, tb.authPassword));
    }
  });
});
