// The compiled `fleetlet hub` against protocol-level clients: joining, authentication, refusal
// of bad input, the operator API, the watch stream, rate limits and a restart.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makePod } from "../lib/builders.ts";
import { ProtocolClient, TestHub } from "../lib/hub.ts";
import { eventually, fleetletBin } from "../lib/testbed.ts";

const hub = new TestHub([
  "--heartbeat-interval",
  "5s",
  "--rate-limit",
  "20",
  "--rate-burst",
  "40",
  "--max-message-bytes",
  "65536",
]);
const clients: ProtocolClient[] = [];

function hello(nodeName: string, streamId = "s1") {
  return { type: "hello", protocolVersion: 1, nodeName, agentVersion: "e2e", streamId };
}

function podMsg(nodeName: string, name: string, seq: number, phase = "Running") {
  const pod = makePod({
    name,
    uid: `uid-${nodeName}-${name}`,
    spec: { nodeName },
    status: { phase: phase as "Running" },
  });
  return { type: "pod.upsert", seq, uid: pod.metadata.uid, pod };
}

/** A connected, welcomed client for a node (freshly joined unless its credential is given). */
async function connected(nodeName: string, credential?: string): Promise<ProtocolClient> {
  const c = new ProtocolClient(hub.url, credential ?? (await hub.credentialFor(nodeName)));
  clients.push(c);
  await c.opened;
  c.send(hello(nodeName));
  await c.waitFor("welcome");
  return c;
}

async function status(res: Response): Promise<{ code: number; reason: string; message: string }> {
  return (await res.json()) as { code: number; reason: string; message: string };
}

describe("fleetlet hub (compiled binary, no root, no test bed)", () => {
  beforeAll(() => hub.start());
  afterAll(async () => {
    for (const c of clients) c.close();
    await hub.cleanup();
  });

  test("the first start prints the operator token and saves it with mode 0600", async () => {
    expect(hub.operatorToken).toStartWith("flo_");
    const file = Bun.file(`${hub.dataDir}/operator-token`);
    expect((await file.text()).trim()).toBe(hub.operatorToken);
    const { statSync } = await import("node:fs");
    expect(statSync(`${hub.dataDir}/operator-token`).mode & 0o777).toBe(0o600);
  });

  test("the operator API without a valid token answers 401 with a Status body", async () => {
    for (const token of ["", "flo_wrong"]) {
      const res = await hub.api("/api/v1/nodes", {}, token);
      expect(res.status).toBe(401);
      expect(await status(res)).toMatchObject({ code: 401, reason: "Unauthorized" });
    }
    expect((await hub.api("/api/v1/watch", {}, "")).status).toBe(401);
    expect((await hub.api("/api/v1/join-tokens", { method: "POST", body: "{}" }, "")).status).toBe(
      401,
    );
  });

  test("/livez, /readyz and /healthz answer ok without a token", async () => {
    for (const path of ["/livez", "/readyz", "/healthz"]) {
      const res = await fetch(`${hub.url}${path}`);
      expect(res.status).toBe(200);
      expect(await res.text()).toBe("ok\n");
    }
  });

  test("join refuses unknown, expired and revoked join tokens with clear reasons", async () => {
    expect(await status(await hub.join("flj_unknown", "a1"))).toMatchObject({
      code: 401,
      message: "unknown join token",
    });
    const expired = await hub.joinToken("1ms");
    await Bun.sleep(20);
    expect((await status(await hub.join(expired, "a1"))).message).toStartWith(
      "join token expired at",
    );
    const res = await hub.api("/api/v1/join-tokens", { method: "POST", body: "{}" });
    const { id, token } = (await res.json()) as { id: string; token: string };
    expect((await hub.api(`/api/v1/join-tokens/${id}`, { method: "DELETE" })).status).toBe(200);
    expect(await status(await hub.join(token, "a1"))).toMatchObject({
      code: 401,
      message: "join token revoked",
    });
    const good = await hub.join(await hub.joinToken(), "a1");
    expect(good.status).toBe(200);
    expect(((await good.json()) as { credential: string }).credential).toStartWith("flc_");
  });

  test("fleetlet hub token list shows join tokens by id with their uses; token revoke revokes one", async () => {
    const hubCli = (...args: string[]) => {
      const p = Bun.spawnSync([fleetletBin, "hub", "token", ...args, "--hub", hub.url], {
        env: { ...process.env, FLEETLET_HUB_TOKEN: hub.operatorToken },
      });
      return { code: p.exitCode, out: p.stdout.toString(), err: p.stderr.toString() };
    };
    const res = await hub.api("/api/v1/join-tokens", {
      method: "POST",
      body: JSON.stringify({ uses: 2, labels: { site: "listed" } }),
    });
    const { id, token } = (await res.json()) as { id: string; token: string };
    expect((await hub.join(token, "n-listed")).status).toBe(200);
    const listed = hubCli("list", "-o", "json");
    expect(listed.code).toBe(0);
    const items = (JSON.parse(listed.out) as { items: Record<string, unknown>[] }).items;
    expect(items.find((t) => t.id === id)).toMatchObject({
      ...{ uses: 2, used: 1, revoked: false, labels: { site: "listed" } },
    });
    expect(JSON.stringify(items)).not.toContain(token.split(":")[0] ?? token);
    expect(hubCli("revoke", id)).toMatchObject({ code: 0, out: `join token ${id} revoked\n` });
    expect(hubCli("list").out).toMatch(
      new RegExp(`${id}\\s+1/2\\s+\\S+\\s+Revoked\\s+site=listed`),
    );
    expect(hubCli("revoke", "nosuchid").code).not.toBe(0);
    expect((await status(await hub.join(token, "n-listed-2"))).message).toBe("join token revoked");
  });

  test("an agent's pod report is acknowledged and served as a PodList with its node", async () => {
    const c = await connected("n-report");
    c.send(podMsg("n-report", "web", 1));
    expect(await c.waitFor("ack")).toEqual({ type: "ack", seq: 1 });
    const list = (await (await hub.api("/api/v1/pods?nodeName=n-report")).json()) as {
      kind: string;
      items: { spec: { nodeName: string } }[];
    };
    expect(list.kind).toBe("PodList");
    expect(list.items.map((p) => p.spec.nodeName)).toEqual(["n-report"]);
    const nodes = Bun.spawnSync([
      fleetletBin,
      "get",
      "nodes",
      "--hub",
      hub.url,
      "--token",
      hub.operatorToken,
    ]);
    const out = nodes.stdout.toString();
    expect(out).toMatch(/^NAME\s+STATUS\s+ONLINE\s+LAST-SEEN\s+PODS\s+VERSION\s+AGE/);
    expect(out).toMatch(/n-report\s+Unknown\s+yes\s+\S+ ago\s+1\s/);
  });

  test("get node NAME and get pod NAME --hub show one object; an unknown name is an error", async () => {
    const c = await connected("n-named");
    c.send(podMsg("n-named", "cam", 1));
    c.send(podMsg("n-named", "other", 2));
    await eventually("the second ack", () =>
      c.received.find((m) => m.type === "ack" && m.seq === 2),
    );
    const cli = (...args: string[]) => {
      const p = Bun.spawnSync([fleetletBin, "get", ...args, "--hub", hub.url], {
        env: { ...process.env, FLEETLET_HUB_TOKEN: hub.operatorToken },
      });
      return { code: p.exitCode, out: p.stdout.toString(), err: p.stderr.toString() };
    };
    const node = cli("node", "n-named");
    expect(node.code).toBe(0);
    expect(node.out.split("\n").filter((l) => l !== "")).toHaveLength(2);
    expect(node.out).toMatch(/\nn-named\s+Unknown\s+yes\s+\S+ ago\s+2\s/);
    const nodeJson = JSON.parse(cli("node", "n-named", "-o", "json").out);
    expect(nodeJson.kind).toBe("Node");
    expect(nodeJson.metadata.name).toBe("n-named");

    const pod = cli("pod", "cam");
    expect(pod.code).toBe(0);
    const rows = pod.out.split("\n").filter((l) => l !== "");
    expect(rows).toHaveLength(2);
    expect(rows[1]).toMatch(/^default\s+cam\s.*\sn-named\b/);
    const podYaml = cli("pod", "cam", "-o", "yaml");
    expect(podYaml.out).toContain("name: cam\n");
    expect(podYaml.out).not.toContain("name: other\n");

    const missingPod = cli("pod", "cam", "-n", "kube-system");
    expect(missingPod.code).toBe(1);
    expect(missingPod.err).toContain('the hub has no pod "cam" in namespace "kube-system"');
    const missingNode = cli("node", "n-nothere");
    expect(missingNode.code).toBe(1);
    expect(missingNode.err).toContain('nodes "n-nothere" not found');
    expect(cli("events", "x").code).not.toBe(0);
  });

  test("a node cannot speak for another node", async () => {
    const cred = await hub.credentialFor("n-self");
    const impostor = new ProtocolClient(hub.url, cred);
    clients.push(impostor);
    await impostor.opened;
    impostor.send(hello("n-other"));
    expect(await impostor.waitFor("error")).toMatchObject({ code: "forbidden" });
    expect((await impostor.waitClosed()).code).toBe(4403);
    const c = await connected("n-self2");
    c.send(podMsg("n-other", "evil", 1));
    expect((await c.waitFor("error")).reason).toContain(
      'cannot report pod "evil" of node "n-other"',
    );
    expect((await c.waitClosed()).code).toBe(4403);
  });

  test.each([
    ["malformed", "{not json", "malformed", 4400],
    ["unknown", '{"type":"exec","cmd":"sh"}', "unknown-type", 4400],
    ["oversized", JSON.stringify({ type: "hb", pad: "x".repeat(70_000) }), "too-large", 4413],
  ])(
    "a %s message is refused and its connection closed while another client keeps working",
    async (what, text, code, closeCode) => {
      const bad = await connected(`n-bad-${what}`);
      const good = await connected(`n-good-${what}`);
      bad.send(text);
      expect(await bad.waitFor("error")).toMatchObject({ code });
      expect((await bad.waitClosed()).code).toBe(closeCode);
      good.send(podMsg(`n-good-${what}`, "web", 1));
      expect(await good.waitFor("ack")).toEqual({ type: "ack", seq: 1 });
    },
  );

  test("a connection without a credential, or with an unknown one, is refused with a reason", async () => {
    for (const cred of [undefined, "flc_unknown"]) {
      const c = new ProtocolClient(hub.url, cred);
      clients.push(c);
      expect(await c.waitFor("error")).toMatchObject({ code: "unauthorized" });
      expect((await c.waitClosed()).code).toBe(4401);
    }
  });

  test("more messages than the rate limit allows close the connection", async () => {
    const c = await connected("n-flood");
    for (let i = 0; i < 100; i++) c.send('{"type":"hb"}');
    expect(await c.waitFor("error")).toMatchObject({ code: "rate-limited" });
    expect((await c.waitClosed()).code).toBe(4429);
  });

  test("hub node revoke closes the node's connection and refuses its credential", async () => {
    const cred = await hub.credentialFor("n-revoke");
    const c = await connected("n-revoke", cred);
    const r = Bun.spawnSync([fleetletBin, "hub", "node", "revoke", "n-revoke", "--hub", hub.url], {
      env: { ...process.env, FLEETLET_HUB_TOKEN: hub.operatorToken },
    });
    expect(r.stdout.toString()).toBe("node/n-revoke revoked\n");
    expect(await c.waitFor("error")).toMatchObject({ code: "revoked" });
    const again = new ProtocolClient(hub.url, cred);
    clients.push(again);
    expect(await again.waitFor("error")).toMatchObject({
      code: "revoked",
      reason: 'node "n-revoke" was revoked',
    });
    expect((await status(await hub.join(await hub.joinToken(), "n-revoke"))).message).toBe(
      'node "n-revoke" was revoked',
    );
  });

  test("the watch stream pushes a pod as it is reported, and a closed agent goes offline", async () => {
    const w = new WebSocket(
      `${hub.url.replace("http", "ws")}/api/v1/watch?kinds=pods,nodes&initial=false&token=${hub.operatorToken}`,
    );
    const seen: {
      type: string;
      object: { kind: string; metadata: { name: string; annotations?: Record<string, string> } };
    }[] = [];
    w.onmessage = (e) => seen.push(JSON.parse(String(e.data)));
    await new Promise((r) => {
      w.onopen = r;
    });
    const c = await connected("n-watch");
    c.send(podMsg("n-watch", "cam", 1));
    await eventually("the pod on the watch stream", () =>
      seen.find((e) => e.type === "ADDED" && e.object.metadata.name === "cam"),
    );
    c.close();
    await eventually("the node offline on the watch stream", () =>
      seen.find(
        (e) =>
          e.object.kind === "Node" &&
          e.object.metadata.name === "n-watch" &&
          e.object.metadata.annotations?.["hub.fleetlet.io/online"] === "false",
      ),
    );
    w.close();
  });

  test("hub node forget drops a revoked node for good, and its name may join again", async () => {
    const cred = await hub.credentialFor("n-forget");
    const c = await connected("n-forget", cred);
    c.send(podMsg("n-forget", "cam", 3));
    await c.waitFor("ack");
    const cli = (...args: string[]) => {
      const p = Bun.spawnSync([fleetletBin, "hub", "node", ...args, "--hub", hub.url], {
        env: { ...process.env, FLEETLET_HUB_TOKEN: hub.operatorToken },
      });
      return { code: p.exitCode, out: p.stdout.toString(), err: p.stderr.toString() };
    };
    const early = cli("forget", "n-forget");
    expect(early.code).toBe(1);
    expect(early.err).toContain('node "n-forget" is not revoked; revoke it first');
    expect((await hub.api("/api/v1/nodes/n-forget")).status).toBe(200);
    expect(cli("forget", "n-nothere").err).toContain('nodes "n-nothere" not found');

    expect(cli("revoke", "n-forget").code).toBe(0);
    const w = new WebSocket(
      `${hub.url.replace("http", "ws")}/api/v1/watch?kinds=pods,nodes&initial=false&token=${hub.operatorToken}`,
    );
    const seen: { type: string; object: { kind: string; metadata: { name: string } } }[] = [];
    w.onmessage = (e) => seen.push(JSON.parse(String(e.data)));
    await new Promise((r) => {
      w.onopen = r;
    });
    const forgot = cli("forget", "n-forget");
    expect(forgot).toMatchObject({
      code: 0,
      out: "node/n-forget forgotten (its name may join again)\n",
    });
    await eventually("DELETED for the pod and the node on the watch stream", () =>
      ["Pod:cam", "Node:n-forget"].every((k) =>
        seen.some(
          (e) => e.type === "DELETED" && `${e.object.kind}:${e.object.metadata.name}` === k,
        ),
      ),
    );
    w.close();

    const gone = async () => {
      expect((await hub.api("/api/v1/nodes/n-forget")).status).toBe(404);
      const pods = (await (await hub.api("/api/v1/pods?nodeName=n-forget")).json()) as {
        items: unknown[];
      };
      expect(pods.items).toEqual([]);
    };
    await gone();
    await hub.kill();
    await hub.start();
    await gone();

    const old = new ProtocolClient(hub.url, cred);
    clients.push(old);
    expect(await old.waitFor("error")).toMatchObject({
      code: "unauthorized",
      reason: "unknown node credential",
    });
    const fresh = new ProtocolClient(hub.url, await hub.credentialFor("n-forget"));
    clients.push(fresh);
    await fresh.opened;
    fresh.send(hello("n-forget", "s2"));
    expect(await fresh.waitFor("welcome")).toMatchObject({ ackedSeq: 0 });
  });

  test("a restarted hub keeps its nodes, pods and acknowledged seqs", async () => {
    const cred = await hub.credentialFor("n-restart");
    const c = await connected("n-restart", cred);
    c.send(podMsg("n-restart", "web", 7));
    await c.waitFor("ack");
    await hub.kill();
    await hub.start();
    const pods = (await (await hub.api("/api/v1/pods?nodeName=n-restart")).json()) as {
      items: unknown[];
    };
    expect(pods.items).toHaveLength(1);
    const node = (await (await hub.api("/api/v1/nodes/n-restart")).json()) as {
      metadata: { annotations: Record<string, string> };
    };
    expect(node.metadata.annotations["hub.fleetlet.io/online"]).toBe("false");
    const back = new ProtocolClient(hub.url, cred);
    clients.push(back);
    await back.opened;
    back.send(hello("n-restart"));
    expect(await back.waitFor("welcome")).toMatchObject({ ackedSeq: 7 });
    const nodes = (await (await hub.api("/api/v1/nodes")).json()) as {
      items: { metadata: { name: string } }[];
    };
    expect(nodes.items.map((n) => n.metadata.name)).toContain("n-restart");
  });
});
