// Logs, exec and port-forward through the compiled hub (HTTPS with its own CA) with `fleetlet
// ... --hub` (always run, kubectl or not), the local interactive exec, the audit log, security,
// bad stream input from a client and from a device, the per-device cap, and a device going
// offline. Needs root and the test bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { connectWebSocket } from "../../src/util/ws-client.ts";
import { Background, run, underPty } from "../lib/processes.ts";
import { StreamsFixture } from "../lib/streams-fixture.ts";
import { eventually, fleetletBin } from "../lib/testbed.ts";

const f = new StreamsFixture();
const { hub, agent } = f;
const pod = () => f.pod;
beforeAll(() => f.setup(), 90_000);
afterAll(() => f.cleanup(), 60_000);
const env = () => f.env;
const fl = (...args: string[]) => f.fleetlet(...args);
const fakeDevice = (name: string) => f.fakeDevice(name);
const logsOf = (name: string) => f.logsOf(name);

/** `p`, or a rejection naming `what` after `ms` (so a hang says what it waited for). */
function within<T>(ms: number, what: string, p: Promise<T>): Promise<T> {
  return Promise.race([
    p,
    new Promise<never>((_, reject) =>
      setTimeout(() => reject(new Error(`waited ${ms} ms for ${what}`)), ms),
    ),
  ]);
}

describe("fleetlet logs, exec and port-forward through the hub (needs root and the test bed)", () => {
  test("logs --hub follows new lines, shows --previous, and refuses a missing container as the API server does", async () => {
    await f.followSeesNewLines(fleetletBin, "--hub", hub.url);
    const prev = await fl("logs", pod(), "-c", "crash", "--previous");
    expect(prev.stdout).toMatch(/^run \d+\.\d+/);
    const bad = await fl("logs", pod(), "-c", "nope");
    expect(bad.stderr.trim()).toBe(
      `fleetlet: Error from server (BadRequest): container nope is not valid for pod ${pod()}`,
    );
  }, 30_000);

  test("exec -it --hub runs a shell under a terminal; exec -i passes stdin to its end; the exit code is ours", async () => {
    const r = await underPty(
      `${fleetletBin} exec -it ${pod()} -c main --hub ${hub.url} -- sh`,
      [
        { after: /\/ # /, type: "stty size; read x; echo got:$x\r" },
        { after: /read x/, type: "hi\r" },
        { after: /got:hi/, type: "exit 5\r" },
      ],
      { env: env(), cols: 90, rows: 20 },
    );
    expect(r.out).toContain("20 90");
    expect(r.code).toBe(5);
    const piped = await run(
      [
        fleetletBin,
        "exec",
        "-i",
        pod(),
        "-c",
        "main",
        "--hub",
        hub.url,
        "--",
        "sh",
        "-c",
        "wc -l; exit 4",
      ],
      { env: env(), stdin: "a\nb\nc\n" },
    );
    expect(piped.stdout.trim()).toBe("3");
    expect(piped.code).toBe(4);
  }, 30_000);

  test("exec -it on the device itself takes the same interactive path", async () => {
    const r = await underPty(
      `${fleetletBin} exec -it ${pod()} -c main --socket ${agent.socket} -- sh`,
      [{ after: /\/ # /, type: "stty size; exit 2\r" }],
      { env: env(), cols: 70, rows: 10 },
    );
    expect(r.out).toContain("10 70");
    expect(r.code).toBe(2);
  }, 20_000);

  test("port-forward --hub reaches httpd in the pod; the audit log shows every exec and port-forward", async () => {
    const pf = new Background(
      [fleetletBin, "port-forward", pod(), "0:8080", "--hub", hub.url],
      env(),
    );
    try {
      const port = (
        await pf.waitFor(/Forwarding from 127\.0\.0\.1:(\d+) -> 8080/, "the forward")
      )[1];
      const res = await fetch(`http://127.0.0.1:${port}/hostname`);
      expect(await res.text()).toBe(`${pod()}\n`);
    } finally {
      await pf.stop();
    }
    const audit = await fl("hub", "audit");
    expect(audit.stdout).toMatch(
      new RegExp(
        `exec\\s+${agent.nodeName}\\s+default/${pod()}\\s+main\\s+-t sh\\s+\\S+\\s+\\S+\\s+exit 5\\s+operator@127\\.0\\.0\\.1`,
      ),
    );
    expect(audit.stdout).toMatch(
      /portforward\s+\S+\s+\S+\s+-\s+ports 8080; 1 connections\s+\S+\s+\S+\s+closed/,
    );
  }, 30_000);

  test("an invalid object is a 422 with one cause per field, as the API server's", async () => {
    const res = await hub.api("/api/v1/namespaces/default/configmaps/bad", {
      method: "PUT",
      body: JSON.stringify({
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: "bad" },
        data: { "no/slash": "x" },
      }),
    });
    expect(res.status).toBe(422);
    const status = (await res.json()) as {
      reason: string;
      details: { causes: { reason: string; field: string }[] };
    };
    expect(status.reason).toBe("Invalid");
    expect(status.details.causes).toEqual([
      expect.objectContaining({ reason: "FieldValueInvalid", field: "data[no/slash]" }),
    ]);
  });

  test("security: no token is 401, a device's credential is 403 on the operator API and on exec", async () => {
    expect((await hub.api("/api/v1/pods", {}, "")).status).toBe(401);
    const credential = readFileSync(join(agent.rootDir, "hub", "credential"), "utf8").trim();
    const asDevice = await hub.api("/api/v1/pods", {}, credential);
    expect(asDevice.status).toBe(403);
    expect(((await asDevice.json()) as { message: string }).message).toContain(
      `the credential of node "${agent.nodeName}" cannot use the operator API`,
    );
    const r = await run(
      [
        fleetletBin,
        "exec",
        pod(),
        "-c",
        "main",
        "--hub",
        hub.url,
        "--token",
        credential,
        "--",
        "true",
      ],
      { env: env() },
    );
    expect(r.stderr).toContain("Error from server (Forbidden)");
  });

  test("a malformed message from a client ends that exec only", async () => {
    const url = `${hub.url.replace(/^http/, "ws")}/api/v1/namespaces/default/pods/${pod()}/exec?command=sh&command=-c&command=sleep%2030&container=main&stdin=true`;
    const open = async () => {
      const ws = await connectWebSocket({
        url,
        protocols: ["v5.channel.k8s.io"],
        headers: { authorization: `Bearer ${hub.operatorToken}` },
        ca: hub.caPem,
      });
      const got: Uint8Array[] = [];
      ws.onMessage((d) => got.push(d));
      let closed = false;
      ws.onClose(() => {
        closed = true;
      });
      return { ws, got, closed: () => closed };
    };
    const bad = await open();
    const good = await open();
    bad.ws.send(Uint8Array.of(4, ...Buffer.from("not json")));
    await eventually("the bad exec to end", () => bad.closed(), 10_000, 20);
    const status = bad.got.find((m) => m[0] === 3);
    expect(Buffer.from(status?.subarray(1) ?? []).toString()).toContain(
      "the client sent a resize message that is not JSON",
    );
    expect(good.closed()).toBe(false);
    good.ws.send(Uint8Array.of(255, 0));
    good.ws.close();
  }, 20_000);
});

describe("streams against a protocol-level device (needs root and the test bed)", () => {
  test("a bad data frame from a device ends that stream only; the cap per device is 429; revoking ends the rest", async () => {
    const dev = await fakeDevice("fake-a");
    const data = (id: number, channel: number, text: string) =>
      dev.sendBinary(Uint8Array.of(1, 0, 0, 0, id, channel, ...Buffer.from(text)));
    /** A log stream the device accepts and starts with a line (the hub answers on the first). */
    const stream = async (n: number) => {
      const res = logsOf("fake-a");
      const open = (await eventually(
        `stream.open ${n}`,
        () => dev.received.filter((m) => m.type === "stream.open")[n - 1],
        5000,
        20,
      )) as { id: number };
      dev.send({ type: "stream.ready", id: open.id, window: 65536 });
      data(open.id, 1, `line of ${open.id}\n`);
      return { id: open.id, res: await within(5000, `the answer to log stream ${n}`, res) };
    };
    const first = await stream(1);
    const second = await stream(2);
    expect(first.res.status).toBe(200);
    data(first.id, 9, "on a channel logs do not have");
    await eventually(
      "the hub to close the bad stream",
      () => dev.received.find((m) => m.type === "stream.close" && m.id === first.id),
      5000,
      20,
    );
    await expect(within(5000, "the bad stream's body to break", first.res.text())).rejects.toThrow(
      /^(?!waited)/,
    );
    expect(dev.closed).toBeUndefined();
    const reader = second.res.body?.getReader();
    expect(
      Buffer.from(
        (await within(5000, "a line", (reader as ReadableStreamDefaultReader<Uint8Array>).read()))
          ?.value ?? [],
      ).toString(),
    ).toBe(`line of ${second.id}\n`);
    await stream(3);
    await stream(4);
    await stream(5);
    const over = await within(5000, "the answer over the cap", logsOf("fake-a"));
    expect(over.status).toBe(429);
    expect(((await over.json()) as { message: string }).message).toBe(
      'node "fake-a" runs 4 streams already (the limit is 4)',
    );
    await hub.api("/api/v1/nodes/fake-a/revoke", { method: "POST" });
    await expect(
      within(
        5000,
        "the revoked stream to break",
        (reader as ReadableStreamDefaultReader<Uint8Array>).read(),
      ),
    ).rejects.toThrow(/^(?!waited)/);
    expect((await dev.waitClosed()).code).toBe(4403);
  }, 30_000);

  test("logs of a pod on a device that is offline give a clear error", async () => {
    const dev = await fakeDevice("fake-b");
    dev.close();
    await dev.waitClosed();
    const res = await logsOf("fake-b");
    expect(res.status).toBe(503);
    expect(((await res.json()) as { message: string }).message).toBe(
      'node "fake-b" is offline: its agent is not connected to the hub',
    );
  });
});
