// The agent's update manager and its wiring: an offer taken (downloaded from a loopback server
// serving the gzip'd release, installed on trial, the agent asked to restart) with its statuses
// to the hub; a refusal said once; a failed download said and tried again; the last status said
// again after a reconnect; a rollback at start; healthy on trial told to the launcher and the
// hub, waiting for the hub no longer than half the trial's limit. No root.
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { linkedVersion } from "../../../../src/agent/update/install.ts";
import { UpdateManager } from "../../../../src/agent/update/manager.ts";
import { setupAgentUpdates } from "../../../../src/agent/update/setup.ts";
import type { UpdateStatus } from "../../../../src/protocol/update.ts";
import {
  generateReleaseKeys,
  parsePublicKey,
  readPrivateKey,
  signRelease,
} from "../../../../src/release/keys.ts";
import { FakeClock } from "../../../../src/util/clock.ts";
import { nullLogger } from "../../../../src/util/log.ts";
import { ReleaseServer } from "../../../lib/release-server.ts";
import { until } from "../../../lib/until.ts";

const release = new TextEncoder().encode(`#!/bin/sh\necho new\n${"y".repeat(100_000)}\n`);
const sha256 = createHash("sha256").update(release).digest("hex");
let root: string;
let dir: string;
let server: ReleaseServer;
let sent: Omit<UpdateStatus, "type">[];

beforeEach(async () => {
  root = mkdtempSync(join(tmpdir(), "fleetlet-update-manager-"));
  dir = join(root, "agent");
  sent = [];
  server = await ReleaseServer.start(Bun.gzipSync(release));
});
afterEach(async () => {
  await server.stop();
  rmSync(root, { recursive: true, force: true });
});

async function signedOffer() {
  const keys = await generateReleaseKeys();
  const { text } = await signRelease(await readPrivateKey(keys.privatePem), {
    version: "0.2.0",
    arch: "amd64",
    size: release.length,
    sha256,
  });
  const offer = { type: "update" as const, version: "0.2.0", arch: "amd64" as const };
  return { offer: { ...offer, manifest: text, path: "/r" }, publicLine: keys.publicLine };
}

/** Where the manager finds the hub; a port nothing listens on makes downloads fail. */
let base = "";

function manager(keys: Awaited<ReturnType<typeof parsePublicKey>>[], clock = new FakeClock()) {
  base = server.url.replace(/\/[^/]*$/, "");
  let restarts = 0;
  const m = new UpdateManager({
    ...{ dir, keys, arch: "amd64", launched: true, bandwidthLimit: 0, clock },
    logger: nullLogger,
    restart: () => restarts++,
    retryBaseMs: 1000,
  });
  m.bind({
    get base() {
      return base;
    },
    fetch: (url, init) => fetch(url, init),
    credential: async () => "node-credential",
    send: (s) => {
      sent.push(s);
      return true;
    },
  });
  return { m, clock, restarts: () => restarts };
}

describe("the update manager (no root)", () => {
  test("an offer is downloaded with the node's credential, installed on trial, and the agent asked to restart", async () => {
    const { offer, publicLine } = await signedOffer();
    const { m, restarts } = manager([await parsePublicKey(publicLine)]);
    m.offer({ ...offer, path: new URL(server.url).pathname });
    await until("the agent asked to restart", () => restarts() === 1, 5000);
    expect(sent.map((s) => s.phase)).toEqual(["downloading", "restarting"]);
    expect(linkedVersion(dir, "current")).toBe(`0.2.0-${sha256.slice(0, 12)}`);
    expect(readFileSync(join(dir, "trial"), "utf8")).toBe(`0.2.0-${sha256.slice(0, 12)} 0\n`);
    m.reconnected();
    expect(sent.at(-1)?.phase).toBe("restarting");
  });

  test("an offer this device must not take is refused once, with the reason, and nothing fetched", async () => {
    const { offer } = await signedOffer();
    const other = await parsePublicKey((await generateReleaseKeys()).publicLine);
    const { m, restarts } = manager([other]);
    m.offer(offer);
    await until("the refusal", () => sent.length === 2, 5000);
    expect(sent[1]).toMatchObject({ version: "0.2.0", phase: "refused", reason: "signature" });
    expect(server.served).toBe(0);
    expect(restarts()).toBe(0);
  });

  test("a failed download is said and tried again after the back-off", async () => {
    const { offer, publicLine } = await signedOffer();
    const { m, clock, restarts } = manager([await parsePublicKey(publicLine)]);
    base = "http://127.0.0.1:1";
    m.offer({ ...offer, path: new URL(server.url).pathname });
    await until("the failure", () => sent.some((s) => s.phase === "failed"), 5000);
    expect(sent.find((s) => s.phase === "failed")).toMatchObject({ reason: "interrupted" });
    base = server.url.replace(/\/[^/]*$/, "");
    clock.step(1000);
    await until("the agent asked to restart", () => restarts() === 1, 5000);
    expect(sent.at(-1)?.phase).toBe("restarting");
    m.close();
  });
});

describe("the agent's update wiring (no root)", () => {
  async function wiring(
    hubConnected: (() => boolean) | undefined,
    env: Record<string, string>,
    keys: string[] = [],
  ) {
    const clock = new FakeClock();
    const events: string[] = [];
    const updates = await setupAgentUpdates({
      config: {
        rootDir: root,
        hub: { urls: ["https://hub.example:7443"] },
        updatePublicKeys: keys,
        updateBandwidthLimit: 0,
      },
      ...{ clock, logger: nullLogger, version: "0.2.0", env },
      nodeEvent: (type, reason, message) => events.push(`${type} ${reason} ${message}`),
      runtimeHealthy: () => true,
      podsSynced: () => true,
      hubConnected,
      restart: () => {},
    });
    updates.manager?.bind({
      base: "https://hub.example:7443",
      fetch,
      credential: async () => "c",
      send: (s) => {
        sent.push(s);
        return true;
      },
    });
    return { clock, events, updates };
  }

  test("a rollback the launcher recorded becomes a Warning node event and a status for the hub, once", async () => {
    mkdirSync(dir);
    writeFileSync(
      join(dir, "rolled-back"),
      "from=0.2.0-3f1c0a9be2d7 to=0.1.0-0123456789ab reason=not healthy within 120s\n",
    );
    const first = await wiring(undefined, {});
    expect(first.events).toEqual([
      "Warning AgentRolledBack The launcher rolled the agent back from 0.2.0-3f1c0a9be2d7 to 0.1.0-0123456789ab: not healthy within 120s",
    ]);
    first.updates.manager?.reconnected();
    expect(sent).toEqual([
      {
        version: "0.2.0",
        phase: "rolled-back",
        reason: "not healthy within 120s",
        message: first.events[0]?.slice("Warning AgentRolledBack ".length),
      },
    ]);
    expect((await wiring(undefined, {})).events).toEqual([]);
  });

  test("on trial, healthy waits for the hub, but no longer than half the trial's limit; then the hub hears it", async () => {
    mkdirSync(dir);
    const { clock, updates } = await wiring(() => false, {
      FLEETLET_TRIAL: "0.2.0-3f1c0a9be2d7",
      FLEETLET_TRIAL_LIMIT: "10",
    });
    const stop = new AbortController();
    const done = updates.run(stop.signal);
    for (let s = 1; s < 5; s++) {
      clock.step(1000);
      await Bun.sleep(0);
      expect(existsSync(join(dir, "healthy"))).toBe(false);
    }
    clock.step(1000);
    await until("healthy", () => existsSync(join(dir, "healthy")), 2000);
    expect(readFileSync(join(dir, "healthy"), "utf8")).toBe("0.2.0-3f1c0a9be2d7\n");
    expect(sent).toEqual([{ version: "0.2.0", phase: "healthy" }]);
    stop.abort();
    await done;
  });

  test("a stop on trial, before the agent is healthy, ends the wiring's run (a service stop does not hang)", async () => {
    mkdirSync(dir);
    const { clock, updates } = await wiring(() => false, {
      FLEETLET_TRIAL: "0.2.0-3f1c0a9be2d7",
      FLEETLET_TRIAL_LIMIT: "60",
    });
    const stop = new AbortController();
    let ended = false;
    const done = updates.run(stop.signal).then(() => {
      ended = true;
    });
    clock.step(1000);
    await Bun.sleep(0);
    stop.abort();
    clock.step(1000);
    await until("the run to end", () => ended, 2000);
    await done;
    expect(existsSync(join(dir, "healthy"))).toBe(false);
  });
});
