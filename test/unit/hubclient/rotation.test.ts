// The agent's side of credential rotation (src/agent/hubclient/rotation.ts and its place in a
// session): ask when the hub says, save atomically with mode 0600, then confirm.
import { afterEach, describe, expect, test } from "bun:test";
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import {
  createHubClient,
  readCredential,
  type SessionDeps,
  startSession,
} from "../../../src/agent/hubclient/index.ts";
import { CredentialRenewal } from "../../../src/agent/hubclient/rotation.ts";
import { writeFileAtomic } from "../../../src/util/atomic-file.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { createLogger, nullLogger } from "../../../src/util/log.ts";
import { until } from "../../lib/until.ts";
import { fakeDial, outboxAt, tempDir } from "./fixtures.ts";

let cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups) c();
  cleanups = [];
});

const DAY = 86_400_000;

function session(save?: (c: string) => void) {
  const t = tempDir();
  cleanups.push(t.cleanup);
  const clock = new FakeClock();
  const path = join(t.dir, "hub", "credential");
  writeFileAtomic(path, "flc_old\n");
  const { dial, conns } = fakeDial();
  const deps: SessionDeps = {
    clock,
    logger: nullLogger,
    dial,
    url: "ws://hub.test/api/v1/agent/connect",
    credential: "flc_old",
    hello: { nodeName: "cam-1", agentVersion: "0.1.0", streamId: "s1" },
    outbox: outboxAt(t.dir),
    onWelcome: () => {},
    onDesired: () => ({ generation: 0 }),
    saveCredential: save ?? ((c) => writeFileAtomic(path, `${c}\n`, { mode: 0o600 })),
  };
  const s = startSession(deps);
  const conn = conns[0];
  if (conn === undefined) throw new Error("no connection dialed");
  conn.open();
  return { clock, conn, path, session: s };
}

const credentialTypes = (sent: Record<string, unknown>[]) =>
  sent.map((m) => m.type).filter((t) => String(t).startsWith("credential"));

describe("credential rotation in a session", () => {
  test("asks when the welcome says, saves the answer 0600, then sends credential.saved", () => {
    const { clock, conn, path } = session();
    conn.welcome(0, { credential: { expiresAt: "2026-01-01T00:00:09Z", renewInMs: 6000 } });
    clock.step(5999);
    expect(credentialTypes(conn.sent)).toEqual([]);
    clock.step(1);
    expect(credentialTypes(conn.sent)).toEqual(["credential.request"]);
    conn.receive({
      type: "credential",
      credential: "flc_new",
      expiresAt: "2026-01-01T00:00:15Z",
      renewInMs: 6000,
    });
    expect(readCredential(path)).toBe("flc_new");
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(credentialTypes(conn.sent)).toEqual(["credential.request", "credential.saved"]);
    clock.step(6000);
    expect(credentialTypes(conn.sent)).toEqual([
      "credential.request",
      "credential.saved",
      "credential.request",
    ]);
    expect(conn.closed).toBeUndefined();
  });

  test("a save that fails sends no credential.saved (the hub keeps the old credential) and keeps the connection", () => {
    const { clock, conn } = session(() => {
      throw new Error("ENOSPC: no space left on device");
    });
    conn.welcome(0, { credential: { expiresAt: "2026-01-01T00:00:09Z", renewInMs: 0 } });
    clock.step(0);
    conn.receive({ type: "credential", credential: "flc_new", expiresAt: "x", renewInMs: 1 });
    expect(credentialTypes(conn.sent)).toEqual(["credential.request"]);
    expect(conn.closed).toBeUndefined();
  });

  test("a welcome without credential (an older hub) is never asked", () => {
    const { clock, conn } = session();
    conn.welcome(0);
    clock.step(20_000);
    expect(credentialTypes(conn.sent)).toEqual([]);
  });

  test("a credential message before welcome is ignored", () => {
    const { conn, path } = session();
    conn.receive({ type: "credential", credential: "flc_new", expiresAt: "x", renewInMs: 1 });
    expect(readFileSync(path, "utf8")).toBe("flc_old\n");
  });
});

describe("CredentialRenewal", () => {
  function renewal() {
    const clock = new FakeClock();
    const sent: string[] = [];
    const r = new CredentialRenewal({
      clock,
      log: nullLogger,
      save: () => {},
      retryMs: DAY,
      conn: {
        setTimer: (ms, fn) => clock.setTimer(ms, fn),
        sendJson: (m) => sent.push((m as { type: string }).type) > 0,
      },
    });
    return { clock, sent, r };
  }
  const welcome = (renewInMs: number) => ({
    type: "welcome" as const,
    protocolVersion: 1,
    heartbeatIntervalMs: 10_000,
    ackedSeq: 0,
    maxMessageBytes: 1,
    rateLimit: { messagesPerSecond: 1, burst: 1 },
    credential: { expiresAt: "2026-04-01T00:00:00Z", renewInMs },
  });

  test("waits a renewal 60 days away (longer than one timer can) and asks once when due", () => {
    const { clock, sent, r } = renewal();
    r.welcomed(welcome(60 * DAY));
    clock.step(60 * DAY - 1);
    expect(sent).toEqual([]);
    clock.step(1);
    expect(sent).toEqual(["credential.request"]);
  });

  test("asks again after the retry time when no credential came", () => {
    const { clock, sent, r } = renewal();
    r.welcomed(welcome(0));
    clock.step(0);
    clock.step(DAY);
    expect(sent).toEqual(["credential.request", "credential.request"]);
  });
});

describe("a refused credential", () => {
  test("is logged with the hub's reason and what brings the device back; it counts as permanent", async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const lines: string[] = [];
    const { dial, conns } = fakeDial();
    const client = createHubClient({
      clock: new FakeClock(),
      logger: createLogger({ write: (l) => lines.push(l) }),
      hubUrls: ["ws://hub.test"],
      nodeName: "cam-1",
      agentVersion: "0.1.0",
      outbox: outboxAt(t.dir),
      credential: async () => "flc_expired",
      credentialPath: "/var/lib/fleetlet/hub/credential",
      dial,
      node: () => {
        throw new Error("not welcomed");
      },
      pod: () => undefined,
      pods: () => [],
      podsSynced: () => true,
      nodeEvent: () => {},
    });
    const once = client.connectOnce(new AbortController().signal);
    await until("a dial", () => conns.length > 0);
    const conn = conns[0];
    if (conn === undefined) throw new Error("no connection dialed");
    const reason = 'the credential of node "cam-1" expired at 2026-04-01T00:00:00Z';
    conn.receive({ type: "error", code: "unauthorized", reason });
    conn.events.onClose(4401, "refused");
    expect((await once).permanent).toBe(true);
    const logged = lines.join("\n");
    expect(logged).toContain(reason.replaceAll('"', '\\"'));
    expect(logged).toContain(
      "to join again: get a new join token (fleetlet hub token create), remove /var/lib/fleetlet/hub/credential and start the agent with --join-token (hub.joinToken)",
    );
    expect(logged).not.toContain("flc_expired");
  });
});
