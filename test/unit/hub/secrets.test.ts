// Secrets stay secret on the hub and in the agent's session: a join, a rotation and failed logins
// log no token or credential (at debug level, hub and agent alike), and the hub's files that hold
// secrets or their hashes are its user's only.
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  dialWebSocket,
  type SessionDeps,
  startSession,
} from "../../../src/agent/hubclient/index.ts";
import { type Hub, startHub } from "../../../src/hub/hub.ts";
import { ownTls } from "../../../src/hub/tls/index.ts";
import { writeFileAtomic } from "../../../src/util/atomic-file.ts";
import { realClock } from "../../../src/util/clock.ts";
import { createLogger } from "../../../src/util/log.ts";
import { until } from "../../lib/until.ts";
import { outboxAt } from "../hubclient/fixtures.ts";

let cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.reverse()) await c();
  cleanups = [];
});

function temp(): string {
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-secrets-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function capture() {
  const lines: string[] = [];
  return { lines, log: createLogger({ level: "debug", write: (l) => lines.push(l) }) };
}

async function hubOn(dataDir: string, log: ReturnType<typeof capture>["log"]): Promise<Hub> {
  const hub = await startHub({
    dataDir,
    hostname: "127.0.0.1",
    port: 0,
    tls: ownTls(dataDir, ["127.0.0.1"], Date.now()),
    clock: realClock,
    log,
    credentialLifetimeMs: 3_000,
  });
  cleanups.push(() => hub.stop());
  return hub;
}

describe("secrets in logs", () => {
  test("a join, a rotation over the connection and failed logins log no token or credential", async () => {
    const dir = temp();
    const hubLog = capture();
    const agentLog = capture();
    const hub = await hubOn(join(dir, "hub"), hubLog.log);
    const ca = readFileSync(join(dir, "hub", "tls", "ca.crt"), "utf8");
    const opTok = hub.createdOperatorToken ?? "";
    const call = (path: string, init: RequestInit, token = opTok) =>
      fetch(`${hub.url}${path}`, {
        ...init,
        headers: { authorization: `Bearer ${token}` },
        tls: { ca },
      } as RequestInit);
    const joinToken = (
      (await (await call("/api/v1/join-tokens", { method: "POST", body: "{}" })).json()) as {
        token: string;
      }
    ).token;
    const joined = (await (
      await call("/api/v1/join", {
        method: "POST",
        body: JSON.stringify({ joinToken, nodeName: "cam-1" }),
      })
    ).json()) as { credential: string };
    const wrong = "flo_wrongwrongwrongwrongwrongwrongwrongwrongwro";
    expect((await call("/api/v1/nodes", {}, wrong)).status).toBe(401);
    expect((await call("/api/v1/nodes", {}, joined.credential)).status).toBe(403);
    expect((await call(`/api/v1/watch?token=${wrong}`, {}, "")).status).toBe(401);

    const path = join(dir, "agent", "hub", "credential");
    writeFileAtomic(path, `${joined.credential}\n`);
    const rotated: string[] = [];
    const deps: SessionDeps = {
      clock: realClock,
      logger: agentLog.log,
      dial: dialWebSocket(ca),
      url: `${hub.url.replace("https", "wss")}/api/v1/agent/connect`,
      credential: joined.credential,
      hello: { nodeName: "cam-1", agentVersion: "0.1.0", streamId: "s1" },
      outbox: outboxAt(join(dir, "agent")),
      onWelcome: () => {},
      onDesired: () => ({ generation: 0 }),
      saveCredential: (c) => {
        writeFileAtomic(path, `${c}\n`);
        rotated.push(c);
      },
    };
    const session = startSession(deps);
    await until("a rotation", () => rotated.length > 0);
    await until("the hub to retire the old credential", () =>
      hubLog.lines.some((l) => l.includes("node credential rotated")),
    );
    session.close(1000, "test over");
    await session.done;
    const bad = startSession({ ...deps, credential: joined.credential, saveCredential: () => {} });
    expect((await bad.done).error?.code).toBe("unauthorized");

    const secrets = [
      opTok,
      joinToken,
      joinToken.split(":")[0] ?? "",
      joined.credential,
      wrong,
      ...rotated,
    ];
    const all = [...hubLog.lines, ...agentLog.lines].join("\n");
    expect(all).toContain("sent a new node credential");
    for (const s of secrets) expect(all).not.toContain(s);
    for (const s of secrets) expect(all).not.toContain(s.slice(4, 20));
  }, 20_000);
});

describe("secret files of the hub", () => {
  test("its data dir is 0700; hub.db with its WAL, the operator token and TLS keys are 0600", async () => {
    const dir = join(temp(), "hub");
    const hub = await hubOn(dir, capture().log);
    await fetch(`${hub.url}/api/v1/join-tokens`, {
      method: "POST",
      headers: { authorization: `Bearer ${hub.createdOperatorToken}` },
      body: "{}",
      tls: { ca: readFileSync(join(dir, "tls", "ca.crt"), "utf8") },
    } as RequestInit);
    const mode = (f: string) => (statSync(join(dir, f)).mode & 0o777).toString(8);
    expect(mode(".")).toBe("700");
    // Folders: tls (keys) and releases (agent releases, not secret but the hub's own).
    const secretFiles = readdirSync(dir).filter((f) => f !== "tls" && f !== "releases");
    expect(secretFiles).toContain("hub.db-wal");
    for (const f of [...secretFiles, "tls/ca.key", "tls/serving.key"])
      expect([f, mode(f)]).toEqual([f, "600"]);
    expect(mode("tls")).toBe("700");
    expect(mode("releases")).toBe("700");
  });
});
