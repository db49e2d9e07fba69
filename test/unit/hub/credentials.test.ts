// Node credentials with a lifetime, rotated over the connection; one-use join tokens; the
// operator token compared in constant time (src/hub/identity.ts, sessions.ts, store.ts).
import { describe, expect, test } from "bun:test";
import type { Fleet } from "../../../src/hub/fleet.ts";
import { Identity } from "../../../src/hub/identity.ts";
import { AgentSessions, type AgentSocket } from "../../../src/hub/sessions.ts";
import { SqliteHubStore } from "../../../src/hub/store-sqlite.ts";
import { hashToken } from "../../../src/hub/tokens.ts";
import { PROTOCOL_VERSION } from "../../../src/protocol/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { testFleet } from "../../lib/hub-fleet.ts";
import { settle } from "../../lib/hub-updates.ts";

const DAY = 86_400_000;
const LIFETIME = 90 * DAY;

/** An identity over `store` (a restart of the hub is a second call on the same store). */
async function identityOver(store: SqliteHubStore, clock: FakeClock, lifetimeMs = LIFETIME) {
  const loaded = await store.load();
  const fleet = testFleet(store, loaded, clock);
  const identity = new Identity(
    { store, nodes: fleet.nodes, credentialLifetimeMs: lifetimeMs },
    loaded,
  );
  await identity.adoptLegacy(clock.now());
  return { fleet, identity };
}

async function joined(lifetimeMs = LIFETIME) {
  const clock = new FakeClock();
  const store = new SqliteHubStore(":memory:");
  const { fleet, identity } = await identityOver(store, clock, lifetimeMs);
  const tok = await identity.createJoinToken(DAY, {}, clock.now());
  const { credential } = await identity.join(
    { joinToken: tok.token, nodeName: "cam-1" },
    clock.now(),
  );
  return { clock, store, fleet, identity, credential };
}

describe("Identity: node credentials expire", () => {
  test("authenticate() takes a credential until its lifetime ends, then refuses it saying why and what to do", async () => {
    const { clock, identity, credential } = await joined();
    clock.step(LIFETIME - 1);
    expect(identity.authenticate(credential, clock.now())).toEqual({ ok: true, nodeName: "cam-1" });
    clock.step(1);
    const refused = identity.authenticate(credential, clock.now());
    expect(refused).toMatchObject({ ok: false, code: "unauthorized" });
    if (refused.ok) throw new Error("unreachable");
    expect(refused.reason).toBe(
      'the credential of node "cam-1" expired at 2026-04-01T00:00:00Z: the device needs a new join token (remove <rootDir>/hub/credential on it and start its agent with --join-token)',
    );
  });

  test("credentialTimes() gives the expiry and asks for renewal after two thirds of the lifetime", async () => {
    const { clock, identity } = await joined();
    expect(identity.credentialTimes("cam-1", clock.now())).toEqual({
      expiresAt: "2026-04-01T00:00:00Z",
      renewInMs: 60 * DAY,
    });
    clock.step(70 * DAY);
    expect(identity.credentialTimes("cam-1", clock.now())?.renewInMs).toBe(0);
  });

  test("adoptLegacy() gives a node stored without a lifetime one from the hub's start, and stores it", async () => {
    const clock = new FakeClock();
    const store = new SqliteHubStore(":memory:");
    store.saveNodeNow({
      name: "old-1",
      credentialHash: hashToken("flc_old"),
      hubLabels: {},
      joinedAt: 0,
      ackedSeq: 0,
      connected: true,
      desiredGeneration: 3,
      ackedGeneration: 3,
    });
    const { identity } = await identityOver(store, clock);
    expect(identity.authenticate("flc_old", clock.now())).toEqual({ ok: true, nodeName: "old-1" });
    expect((await store.load()).nodes[0]?.credentialExpiresAt).toBe(clock.now() + LIFETIME);
    clock.step(LIFETIME);
    expect(identity.authenticate("flc_old", clock.now()).ok).toBe(false);
  });

  test("a node whose credentials all expired may join again with a new join token and keeps its record", async () => {
    const { clock, fleet, identity } = await joined();
    const rec = fleet.nodes.get("cam-1");
    if (rec === undefined) throw new Error("no record");
    rec.connected = true;
    rec.desiredGeneration = 7;
    const tok = await identity.createJoinToken(DAY, {}, clock.now());
    await expect(
      identity.join({ joinToken: tok.token, nodeName: "cam-1" }, clock.now()),
    ).rejects.toThrow('node "cam-1" already joined');
    clock.step(LIFETIME);
    const tok2 = await identity.createJoinToken(DAY, {}, clock.now());
    const again = await identity.join({ joinToken: tok2.token, nodeName: "cam-1" }, clock.now());
    expect(identity.authenticate(again.credential, clock.now()).ok).toBe(true);
    expect(fleet.nodes.get("cam-1")?.desiredGeneration).toBe(7);
  });
});

describe("Identity: rotation", () => {
  test("renewCredential() keeps the old credential working until the new one is used, then forgets it", async () => {
    const { clock, identity, credential } = await joined();
    clock.step(61 * DAY);
    const renewed = await identity.renewCredential("cam-1", clock.now());
    expect(renewed.credential).toStartWith("flc_");
    expect(renewed.renewInMs).toBe(60 * DAY);
    expect(identity.authenticate(credential, clock.now()).ok).toBe(true);
    expect(identity.authenticate(renewed.credential, clock.now()).ok).toBe(true);
    expect(identity.authenticate(credential, clock.now())).toMatchObject({
      ok: false,
      reason: "unknown node credential",
    });
    clock.step(80 * DAY);
    expect(identity.authenticate(renewed.credential, clock.now()).ok).toBe(true);
  });

  test("credentialSaved() makes the new credential the only one", async () => {
    const { clock, identity, credential } = await joined();
    const renewed = await identity.renewCredential("cam-1", clock.now());
    identity.credentialSaved("cam-1");
    expect(identity.authenticate(credential, clock.now()).ok).toBe(false);
    expect(identity.authenticate(renewed.credential, clock.now()).ok).toBe(true);
  });

  test("a pending credential is stored before it is sent: after a hub restart both still work; using it is stored by the next flush", async () => {
    const { clock, store, identity, credential } = await joined();
    const renewed = await identity.renewCredential("cam-1", clock.now());
    const restarted = (await identityOver(store, clock)).identity;
    expect(restarted.authenticate(credential, clock.now()).ok).toBe(true);
    expect(restarted.authenticate(renewed.credential, clock.now()).ok).toBe(true);
    // Using it promotes it in memory at once, in the store with the next flush.
    await store.flush();
    const again = (await identityOver(store, clock)).identity;
    expect(again.authenticate(credential, clock.now()).ok).toBe(false);
  });

  test("a second request replaces the pending credential (the agent lost the first)", async () => {
    const { clock, identity, credential } = await joined();
    const first = await identity.renewCredential("cam-1", clock.now());
    const second = await identity.renewCredential("cam-1", clock.now());
    expect(identity.authenticate(first.credential, clock.now()).ok).toBe(false);
    expect(identity.authenticate(credential, clock.now()).ok).toBe(true);
    expect(identity.authenticate(second.credential, clock.now()).ok).toBe(true);
  });

  test("a revoked node's pending credential is refused as revoked", async () => {
    const { clock, identity } = await joined();
    const renewed = await identity.renewCredential("cam-1", clock.now());
    await identity.revokeNode("cam-1", clock.now());
    expect(identity.authenticate(renewed.credential, clock.now())).toMatchObject({
      ok: false,
      code: "revoked",
    });
  });
});

describe("Identity: join tokens with a number of uses", () => {
  test("a one-use token joins once; the second join is refused saying why", async () => {
    const { clock, identity } = await joined();
    const tok = await identity.createJoinToken(DAY, {}, clock.now(), 1);
    expect(tok.uses).toBe(1);
    await identity.join({ joinToken: tok.token, nodeName: "cam-2" }, clock.now());
    await expect(
      identity.join({ joinToken: tok.token, nodeName: "cam-3" }, clock.now()),
    ).rejects.toThrow(`join token ${tok.id} was already used: it allowed 1 join`);
  });

  test("the use count is stored with the join: a restarted hub refuses the token too", async () => {
    const { clock, store, identity } = await joined();
    const tok = await identity.createJoinToken(DAY, {}, clock.now(), 2);
    await identity.join({ joinToken: tok.token, nodeName: "cam-2" }, clock.now());
    await identity.join({ joinToken: tok.token, nodeName: "cam-3" }, clock.now());
    const loaded = await store.load();
    expect(loaded.joinTokens.find((t) => t.id === tok.id)).toMatchObject({ maxUses: 2, used: 2 });
    expect(loaded.nodes.map((n) => n.name).sort()).toEqual(["cam-1", "cam-2", "cam-3"]);
    const restarted = (await identityOver(store, clock)).identity;
    await expect(
      restarted.join({ joinToken: tok.token, nodeName: "cam-4" }, clock.now()),
    ).rejects.toThrow("was already used: it allowed 2 joins");
  });

  test("two joins at once on a one-use token: the store writes one at a time, so one is refused", async () => {
    const clock = new FakeClock();
    const store = new SqliteHubStore(":memory:");
    const write = store.saveJoinNow.bind(store);
    // A store across the network: the write completes later.
    store.saveJoinNow = async (t, p) => {
      await Bun.sleep(5);
      return write(t, p);
    };
    const { identity } = await identityOver(store, clock);
    const tok = await identity.createJoinToken(DAY, {}, clock.now(), 1);
    const both = await Promise.allSettled(
      ["cam-2", "cam-3"].map((nodeName) =>
        identity.join({ joinToken: tok.token, nodeName }, clock.now()),
      ),
    );
    expect(both.map((r) => r.status).sort()).toEqual(["fulfilled", "rejected"]);
    expect((await store.load()).nodes.map((n) => n.name)).toHaveLength(1);
  });

  test("a refused join does not count a use", async () => {
    const { clock, identity } = await joined();
    const tok = await identity.createJoinToken(DAY, {}, clock.now(), 1);
    await expect(
      identity.join({ joinToken: tok.token, nodeName: "Bad_Name" }, clock.now()),
    ).rejects.toThrow("invalid node name");
    expect(
      (await identity.join({ joinToken: tok.token, nodeName: "cam-2" }, clock.now())).nodeName,
    ).toBe("cam-2");
  });
});

describe("Identity: the operator token", () => {
  test("isOperator() takes only the operator token; a stored hash of another length is refused, not thrown", async () => {
    const clock = new FakeClock();
    const store = new SqliteHubStore(":memory:");
    const { identity } = await identityOver(store, clock);
    const token = (await identity.ensureOperatorToken()) ?? "";
    expect(identity.isOperator(token)).toBe(true);
    expect(identity.isOperator(`${token}x`)).toBe(false);
    expect(identity.isOperator(undefined)).toBe(false);
    await store.saveOperatorHash("abcd");
    const other = (await identityOver(store, clock)).identity;
    expect(other.isOperator(token)).toBe(false);
  });
});

function sessionsOver(identity: Identity, fleet: Fleet, clock: FakeClock) {
  return new AgentSessions({
    fleet,
    identity,
    clock,
    log: nullLogger,
    heartbeatIntervalMs: 10_000,
    maxMessageBytes: 1 << 20,
    rateLimit: { messagesPerSecond: 100, burst: 100 },
    helloTimeoutMs: 5000,
    markDirty: () => {},
    flushNow: () => {},
  });
}

function connect(sessions: AgentSessions, credential: string, nodeName = "cam-1") {
  const sent: Record<string, unknown>[] = [];
  const ws: AgentSocket & { closedWith?: number } = {
    data: sessions.newData(credential, true),
    send: (t) => sent.push(JSON.parse(String(t))),
    close(code) {
      this.closedWith = code;
    },
  };
  sessions.open(ws);
  sessions.message(
    ws,
    JSON.stringify({
      type: "hello",
      protocolVersion: PROTOCOL_VERSION,
      nodeName,
      agentVersion: "0.1.0",
      streamId: "s1",
    }),
  );
  return { ws, sent };
}

describe("AgentSessions: rotation over the connection", () => {
  test("welcome carries the credential's expiry; credential.request is answered with a new one, credential.saved retires the old", async () => {
    const { clock, fleet, identity, credential } = await joined();
    const sessions = sessionsOver(identity, fleet, clock);
    const { ws, sent } = connect(sessions, credential);
    expect(sent[0]).toMatchObject({
      type: "welcome",
      credential: { expiresAt: "2026-04-01T00:00:00Z", renewInMs: 60 * DAY },
    });
    clock.step(60 * DAY);
    sessions.message(ws, '{"type":"credential.request"}');
    await settle();
    const answer = sent.at(-1) as { type: string; credential: string; renewInMs: number };
    expect(answer).toMatchObject({ type: "credential", expiresAt: "2026-05-31T00:00:00Z" });
    expect(answer.renewInMs).toBe(60 * DAY);
    expect(identity.authenticate(credential, clock.now()).ok).toBe(true);
    sessions.message(ws, '{"type":"credential.saved"}');
    expect(identity.authenticate(credential, clock.now()).ok).toBe(false);
    expect(ws.closedWith).toBeUndefined();
    const again = connect(sessions, answer.credential);
    expect(again.sent[0]).toMatchObject({ type: "welcome" });
  });

  test("a connection with an expired credential is refused with unauthorized and the reason", async () => {
    const { clock, fleet, identity, credential } = await joined();
    const sessions = sessionsOver(identity, fleet, clock);
    clock.step(LIFETIME);
    const { ws, sent } = connect(sessions, credential);
    expect(sent[0]).toMatchObject({ type: "error", code: "unauthorized" });
    expect(String(sent[0]?.reason)).toContain("expired at 2026-04-01T00:00:00Z");
    expect(ws.closedWith).toBe(4401);
  });

  test("closeExpired() closes a live connection whose credential expired (an agent that does not rotate) and keeps one that rotated", async () => {
    const { clock, fleet, identity, credential } = await joined();
    const tok = await identity.createJoinToken(DAY, {}, clock.now());
    const other = await identity.join({ joinToken: tok.token, nodeName: "cam-2" }, clock.now());
    const sessions = sessionsOver(identity, fleet, clock);
    const old = connect(sessions, credential);
    const rotating = connect(sessions, other.credential, "cam-2");
    clock.step(60 * DAY);
    sessions.message(rotating.ws, '{"type":"credential.request"}');
    await settle();
    sessions.message(rotating.ws, '{"type":"credential.saved"}');
    clock.step(LIFETIME - 60 * DAY - 1);
    sessions.closeExpired(clock.now());
    expect(old.ws.closedWith).toBeUndefined();
    clock.step(1);
    sessions.closeExpired(clock.now());
    expect(old.ws.closedWith).toBe(4401);
    expect(String(old.sent.at(-1)?.reason)).toContain('the credential of node "cam-1" expired at');
    expect(rotating.ws.closedWith).toBeUndefined();
    expect(sessions.count()).toBe(1);
  });
});
