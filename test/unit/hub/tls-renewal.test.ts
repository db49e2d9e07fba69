// The hub renews its own serving certificate while it runs (src/hub/tls/renew.ts): new TLS
// connections get the new certificate, signed by the same CA; open connections go on.
import { afterEach, describe, expect, test } from "bun:test";
import { X509Certificate } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "node:tls";
import { type Hub, startHub } from "../../../src/hub/hub.ts";
import { ownTls } from "../../../src/hub/tls/index.ts";
import { TlsRenewal } from "../../../src/hub/tls/renew.ts";
import { PROTOCOL_VERSION } from "../../../src/protocol/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { createLogger, nullLogger } from "../../../src/util/log.ts";

let cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.reverse()) await c();
  cleanups = [];
});

function temp(): string {
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-tls-renew-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const SANS = ["127.0.0.1", "localhost"];

describe("TlsRenewal.check()", () => {
  test("serves a new certificate of the same CA once the current one is in its last third", async () => {
    const dir = temp();
    const clock = new FakeClock(Date.UTC(2026, 0, 1));
    const first = ownTls(dir, SANS, clock.now(), 90_000);
    const applied: string[] = [];
    const r = new TlsRenewal({
      clock,
      log: nullLogger,
      renew: (now) => ownTls(dir, SANS, now, 90_000),
      apply: (t) => applied.push(t.cert),
      intervalMs: 10_000,
    });
    r.run();
    clock.step(50_000);
    await Promise.resolve();
    expect(applied).toEqual([]);
    clock.step(20_000);
    await Promise.resolve(); // the check's await of renew()
    expect(applied.length).toBe(1);
    const renewed = new X509Certificate(applied[0] ?? "");
    expect(renewed.serialNumber).not.toBe(new X509Certificate(first.cert).serialNumber);
    expect(renewed.checkIssued(new X509Certificate(first.caPem ?? ""))).toBe(true);
    r.stop();
  });

  test("a renewal that fails is logged and keeps the current certificate", async () => {
    const lines: string[] = [];
    const r = new TlsRenewal({
      clock: new FakeClock(),
      log: createLogger({ write: (l) => lines.push(l) }),
      renew: () => {
        throw new Error("ENOSPC: no space left on device");
      },
      apply: () => {
        throw new Error("must not be called");
      },
      intervalMs: 1000,
    });
    expect(await r.check()).toBe(false);
    expect(lines.join("")).toContain("cannot renew the hub's serving certificate");
  });
});

/** The serial number of the certificate a new TLS connection to `port` is served. */
function servedSerial(port: number, ca: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: "127.0.0.1", port, ca }, () => {
      resolve(s.getPeerCertificate().serialNumber);
      s.end();
    });
    s.on("error", reject);
  });
}

describe("a running hub", () => {
  test("serves its renewed certificate to new TLS connections while an agent's open connection goes on", async () => {
    const dir = temp();
    const clock = new FakeClock(Date.now());
    const LIFETIME = 60_000;
    const tls = ownTls(dir, SANS, clock.now(), LIFETIME);
    const ca = tls.caPem ?? "";
    const hub: Hub = await startHub({
      dataDir: dir,
      hostname: "127.0.0.1",
      port: 0,
      tls,
      renewTls: (now) => ownTls(dir, SANS, now, LIFETIME),
      tlsCheckIntervalMs: 41_000,
      clock,
      log: nullLogger,
    });
    cleanups.push(() => hub.stop());
    const port = Number(new URL(hub.url).port);
    const before = await servedSerial(port, ca);
    expect(before).toBe(new X509Certificate(tls.cert).serialNumber);

    const opTok = hub.createdOperatorToken ?? "";
    const tokRes = await fetch(`${hub.url}/api/v1/join-tokens`, {
      method: "POST",
      headers: { authorization: `Bearer ${opTok}` },
      body: "{}",
      tls: { ca },
    } as RequestInit);
    const joinToken = ((await tokRes.json()) as { token: string }).token;
    const joined = await fetch(`${hub.url}/api/v1/join`, {
      method: "POST",
      body: JSON.stringify({ joinToken, nodeName: "cam-1" }),
      tls: { ca },
    } as RequestInit);
    const { credential } = (await joined.json()) as { credential: string };
    const ws = new WebSocket(`${hub.url.replace("https", "wss")}/api/v1/agent/connect`, {
      headers: { authorization: `Bearer ${credential}` },
      tls: { ca },
    } as unknown as string[]);
    const received: string[] = [];
    const next = () =>
      new Promise<string>((resolve) => {
        ws.onmessage = (e) => {
          received.push(String(e.data));
          resolve(String(e.data));
        };
      });
    await new Promise((r) => {
      ws.onopen = r;
    });
    const welcome = next();
    ws.send(
      JSON.stringify({
        type: "hello",
        protocolVersion: PROTOCOL_VERSION,
        nodeName: "cam-1",
        agentVersion: "0.1.0",
        streamId: "s1",
      }),
    );
    expect(await welcome).toContain('"type":"welcome"');

    clock.step(41_000);
    const after = await servedSerial(port, ca);
    expect(after).not.toBe(before);
    const answer = next();
    ws.send('{"type":"hb"}');
    expect(await answer).toBe('{"type":"hb"}');
    expect(hub.connectedAgents()).toBe(1);
    ws.close();
  });
});
