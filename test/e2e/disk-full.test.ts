// Full disks for real, with the compiled agent and hub: the agent's root dir, containerd's image
// filesystem and the hub's data dir each on a small filesystem of its own (test/lib/small-fs.ts,
// test/lib/small-containerd.ts) that the test fills to 100 % and frees again. Eviction thresholds
// are off (--eviction-hard ""): what is under test is how writes fail and resume, not the
// eviction manager (test/e2e/eviction-disk.test.ts). Needs root and the test bed.

import { Database } from "bun:sqlite";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createPrivateKey, X509Certificate } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import type { Node } from "../../src/api/node.ts";
import type { Event, Pod } from "../../src/api/types.ts";
import { createCriClient } from "../../src/cri/index.ts";
import type { SequencedMessage } from "../../src/protocol/index.ts";
import { TestAgent } from "../lib/agent.ts";
import { containerIdOf, isRunning, podManifest } from "../lib/eviction.ts";
import { TestHub } from "../lib/hub.ts";
import { SmallContainerd } from "../lib/small-containerd.ts";
import { fill, free, leave, mountTmpfs, unmount } from "../lib/small-fs.ts";
import { eventually } from "../lib/testbed.ts";

const quiet = ["--eviction-hard", "", "--node-status-update-frequency", "1s"];
// A TLS hub, so its data dir holds what a full disk must not tear: the CA, the serving
// certificate, their keys, the operator token and the database.
// At debug level the hub logs every failed attempt to write its store, with its time.
const hub = new TestHub(["--heartbeat-interval", "1s", "--log-level", "debug"], "127.0.0.1", true);
const agentArgs = [...quiet, "--hub-reconnect-back-off-base", "200ms"];
const agent = new TestAgent({
  rootDirMount: ["-t", "tmpfs", "-o", "size=24m", "tmpfs"],
  args: agentArgs,
});
const small = new SmallContainerd(96);
const imageAgent = new TestAgent({ endpoint: small.endpoint, args: [...quiet] });

beforeAll(async () => {
  mountTmpfs(hub.dataDir, 12);
  await hub.start();
  agentArgs.push("--hub", hub.url, "--join-token", await hub.joinToken());
  await agent.start();
}, 60_000);
/** What the tests filled, freed by afterAll when a test failed before it freed them. */
const fillers: string[] = [];
afterAll(async () => {
  for (const f of fillers) free(f);
  await agent.cleanup();
  await imageAgent.cleanup().catch(() => {});
  await small.stop();
  await hub.stop();
  unmount(hub.dataDir);
  await hub.cleanup();
}, 90_000);

async function hubGet<T>(path: string): Promise<T> {
  const res = await hub.api(path);
  if (res.status !== 200) throw new Error(`GET ${path}: HTTP ${res.status}`);
  return (await res.json()) as T;
}
const hubEvents = async () =>
  (await hubGet<{ items: Event[] }>(`/api/v1/events?nodeName=${agent.nodeName}`)).items;

/** The agent's event of `reason` whose message holds `text`; on a timeout, what it had. */
async function localEvent(a: TestAgent, reason: string, text: string): Promise<Event> {
  try {
    return await eventually(
      `event ${reason} naming ${text}`,
      async () => (await a.events()).find((e) => e.reason === reason && e.message?.includes(text)),
      20_000,
    );
  } catch (err) {
    const had = (await a.events()).map((e) => `${e.reason}: ${e.message}`).join("\n");
    throw new Error(`${(err as Error).message}\nevents:\n${had}\nagent:\n${a.output.slice(-3000)}`);
  }
}

/** The agent's state files (not the pods' folders): none torn, no temp file left. */
function checkStateFiles(root: string, strict: boolean): string[] {
  const seen: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (name === "pods" || name === "fill-to-full" || name.endsWith(".sock")) continue;
      if (statSync(path).isDirectory()) walk(path);
      else {
        seen.push(path.slice(root.length + 1));
        expect(name.endsWith(".tmp")).toBe(false);
        const text = readFileSync(path, "utf8");
        if (name.endsWith(".json") || name === "cpu_manager_state") JSON.parse(text);
        if (name === "outbox") {
          const lines = text.split("\n").slice(0, -1);
          // While the disk is full, a torn last line may wait for the rewrite; never another.
          for (const line of strict ? lines : lines.slice(0, -1)) JSON.parse(line);
        }
        if (name === "credential") expect(text.trim()).not.toBe("");
      }
    }
  };
  walk(root);
  return seen;
}

/** The agent's outbox file as the hub sees it: what the hub acknowledged, and what waits. */
function outboxOf(a: TestAgent): { ackedSeq: number; waiting: SequencedMessage[] } {
  const text = readFileSync(join(a.rootDir, "hub", "outbox"), "utf8");
  let ackedSeq = 0;
  const messages: SequencedMessage[] = [];
  for (const line of text.split("\n").filter((l) => l !== "")) {
    const l = JSON.parse(line) as {
      t: string;
      ackedSeq?: number;
      seq?: number;
      m?: SequencedMessage;
    };
    if (l.t === "h") ackedSeq = Math.max(ackedSeq, l.ackedSeq ?? 0);
    if (l.t === "a") ackedSeq = Math.max(ackedSeq, l.seq ?? 0);
    if (l.t === "m" && l.m !== undefined) messages.push(l.m);
  }
  return { ackedSeq, waiting: messages.filter((m) => m.seq > ackedSeq) };
}

/** The seq of the agent's report of pod `name` Running, if one waits unacknowledged. */
function runningReportWaiting(a: TestAgent, name: string): number | undefined {
  return outboxOf(a).waiting.find(
    (m) =>
      m.type === "pod.upsert" && m.pod.metadata.name === name && m.pod.status?.phase === "Running",
  )?.seq;
}

/** The phase of pod `name` of `node` as written in the hub's database (opened read-only). */
function storedPhase(node: string, name: string): string | undefined {
  const db = new Database(join(hub.dataDir, "hub.db"), { readonly: true });
  try {
    const rows = db.query("SELECT pod FROM pods WHERE node = ?").all(node) as { pod: string }[];
    const pod = rows.map((r) => JSON.parse(r.pod) as Pod).find((p) => p.metadata.name === name);
    return pod?.status?.phase;
  } finally {
    db.close();
  }
}

/** The hub's data dir holds no temp file, a database that checks whole, and whole keys,
 * certificates and operator token. */
function checkHubFiles(): void {
  const dir = hub.dataDir;
  const all = [...readdirSync(dir), ...readdirSync(join(dir, "tls")).map((f) => `tls/${f}`)];
  expect(all.filter((f) => f.endsWith(".tmp"))).toEqual([]);
  for (const cert of ["tls/ca.crt", "tls/serving.crt"])
    expect(new X509Certificate(readFileSync(join(dir, cert))).subject).toContain("fleetlet-hub");
  for (const key of ["tls/ca.key", "tls/serving.key"])
    expect(createPrivateKey(readFileSync(join(dir, key))).type).toBe("private");
  expect(readFileSync(join(dir, "operator-token"), "utf8")).toBe(`${hub.operatorToken}\n`);
  const db = new Database(join(dir, "hub.db"), { readonly: true });
  try {
    expect(db.query("PRAGMA integrity_check").get()).toEqual({ integrity_check: "ok" });
  } finally {
    db.close();
  }
}

/** Whether the hub says node `name` is online (its agent connected). */
async function online(name: string): Promise<boolean> {
  const res = await hub.api(`/api/v1/nodes/${name}`);
  if (res.status !== 200) return false;
  return ((await res.json()) as Node).metadata.annotations?.["hub.fleetlet.io/online"] === "true";
}

const count = (text: string, what: string) => text.split(what).length - 1;

/** When the hub's flushes failed, from its log (every one is logged, at debug level or above). */
const failedFlushTimes = () =>
  [...hub.output.matchAll(/^(\S+) (?:ERROR|DEBUG) hub store write failed/gm)].map((m) =>
    Date.parse(m[1] ?? ""),
  );

describe("full disks (needs root and the test bed)", () => {
  test("the agent's root dir full: pods keep running, the agent says why, the hub still hears it; freed, writes resume", async () => {
    agent.writeManifest("keep.yaml", podManifest(agent, "keep", { script: "sleep 3600" }));
    const keep = await agent.waitPod("keep", "Running", isRunning);
    const filler = fill(agent.rootDir);
    fillers.push(filler);
    // A pod written now cannot get its folder: its events and status are what the agent must
    // save, and cannot.
    agent.writeManifest("blocked.yaml", podManifest(agent, "blocked", { script: "sleep 3600" }));
    const outbox = join(agent.rootDir, "hub", "outbox");
    const failed = await localEvent(agent, "FailedToWriteState", outbox);
    expect(failed.type).toBe("Warning");
    expect(failed.message).toContain("no space left on device");
    // The event travels to the hub from memory: reports go on while nothing can be saved.
    await eventually(
      "FailedToWriteState in the hub",
      async () => (await hubEvents()).some((e) => e.reason === "FailedToWriteState"),
      20_000,
    );
    expect(agent.output).toContain("cannot write a state file; pods keep running");
    const now = (await agent.pod("keep")) as Pod;
    expect(isRunning(now)).toBe(true);
    expect(containerIdOf(now)).toBe(containerIdOf(keep));
    const files = checkStateFiles(agent.rootDir, false);
    expect(files).toContain("hub/outbox");
    free(filler);
    await localEvent(agent, "StateWritten", outbox);
    checkStateFiles(agent.rootDir, true);
    await agent.waitPod("blocked", "Running", isRunning, 40_000);
    agent.writeManifest("after.yaml", podManifest(agent, "after", { script: "sleep 3600" }));
    await agent.waitPod("after", "Running", isRunning, 40_000);
    expect(isRunning((await agent.pod("keep")) as Pod)).toBe(true);
  }, 120_000);

  test("the image filesystem full: a pull fails with the reason on the pod, running pods untouched; freed, the pull succeeds", async () => {
    await small.start();
    const cri = createCriClient({ endpoint: small.endpoint });
    const tb = imageAgent.tb;
    try {
      await cri.pullImage({ image: { image: tb.busybox } });
      await cri.pullImage({ image: { image: tb.sandboxImage } });
    } finally {
      cri.close();
    }
    await imageAgent.start();
    imageAgent.writeManifest(
      "keep.yaml",
      podManifest(imageAgent, "keep", { script: "sleep 3600" }),
    );
    const keep = await imageAgent.waitPod("keep", "Running", isRunning);
    const filler = fill(small.root);
    fillers.push(filler);
    // Room for a sandbox (a few small files), none for a 16 MiB image. Full to the last byte,
    // containerd cannot create the sandbox: the pod says FailedCreatePodSandBox, no space left.
    leave(filler, 4 * 1024 * 1024);
    const big = podManifest(imageAgent, "big", { script: "sleep 3600" }).replace(
      tb.busybox,
      tb.filler["16m"],
    );
    imageAgent.writeManifest("big.yaml", big);
    const waiting = await imageAgent
      .waitPod(
        "big",
        "waiting for its image",
        (p) =>
          /ErrImagePull|ImagePullBackOff/.test(
            p.status?.containerStatuses?.[0]?.state?.waiting?.reason ?? "",
          ),
        40_000,
      )
      .catch(async (err) => {
        const p = await imageAgent.pod("big");
        const ev = (await imageAgent.events()).map((e) => `${e.reason}: ${e.message}`).join("\n");
        const log = readFileSync(join(small.dir, "containerd.log"), "utf8").slice(-2500);
        console.log(`EVENTS\n${ev}\nCONTAINERD\n${log}`);
        throw new Error(
          `${err.message}\nstatus: ${JSON.stringify(p?.status)}\nagent: ${imageAgent.output.slice(-2500)}`,
        );
      });
    const pulled = await localEvent(imageAgent, "Failed", tb.filler["16m"]);
    expect(pulled.message).toContain("no space left on device");
    expect(waiting.status?.phase).toBe("Pending");
    const now = (await imageAgent.pod("keep")) as Pod;
    expect(isRunning(now)).toBe(true);
    expect(containerIdOf(now)).toBe(containerIdOf(keep));
    free(filler);
    await imageAgent.waitPod("big", "Running", isRunning, 60_000);
  }, 150_000);

  test("the hub's data dir full: writes fail with 507, reads go on, agents stay connected and keep what is not stored; freed, it is stored with no restart", async () => {
    const configMap = (name: string) =>
      JSON.stringify({
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name },
        data: { payload: "x".repeat(900 * 1024) },
      });
    const post = (name: string) =>
      hub.api("/api/v1/namespaces/default/configmaps", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: configMap(name),
      });
    // The agent is connected before the disk fills: a join is a write, which a full store refuses.
    await eventually("the agent online in the hub", () => online(agent.nodeName), 30_000);
    const disconnects = count(agent.output, "disconnected from the hub");
    const filler = fill(hub.dataDir);
    fillers.push(filler);
    // SQLite's WAL may still have room from before: write until the store needs new space.
    let refused: Response | undefined;
    for (let i = 0; i < 12 && refused === undefined; i++) {
      const res = await post(`full-${i}`);
      if (res.status === 507) refused = res;
      else expect(res.status).toBe(201);
    }
    expect(refused).toBeDefined();
    const status = (await refused?.json()) as { reason: string; message: string; code: number };
    expect(status).toMatchObject({ kind: "Status", reason: "InsufficientStorage", code: 507 });
    expect(status.message).toContain("the hub's data disk is full");
    // Reads are served; the agent's reports still change the hub's view (in memory).
    expect((await hub.api("/api/v1/nodes")).status).toBe(200);
    expect((await hub.api("/api/v1/namespaces/default/configmaps")).status).toBe(200);
    const during = `during-${agent.nodeName}`;
    agent.writeManifest("during.yaml", podManifest(agent, "during", { script: "sleep 3600" }));
    // By `inView` the hub has the report (in memory and queued for its store).
    const inView = await eventually(
      "the pod started while the hub's disk is full, in the hub's view",
      async () => {
        const pods = await hubGet<{ items: Pod[] }>(`/api/v1/pods?nodeName=${agent.nodeName}`);
        const running = pods.items.some(
          (p) => p.metadata.name === during && p.status?.phase === "Running",
        );
        return running ? Date.now() : undefined;
      },
      30_000,
    );
    expect(hub.output).toContain("ERROR hub store write failed");
    // Two attempts to write it fail (the first one's ack, had it been sent, would have reached
    // the agent long before the second, a backoff later).
    await eventually(
      "two failed attempts to store the report",
      () => failedFlushTimes().filter((t) => t > inView).length >= 2,
      70_000,
    );
    // Not stored, so not acknowledged: the report waits in the agent's outbox (read first), and
    // the hub's database does not have it (read after).
    const seq = runningReportWaiting(agent, during);
    expect(seq).toBeDefined();
    expect(storedPhase(agent.nodeName, during)).not.toBe("Running");
    expect(await online(agent.nodeName)).toBe(true);
    expect(count(agent.output, "disconnected from the hub")).toBe(disconnects);
    expect(hub.proc?.exitCode).toBeNull();
    free(filler);
    const res = await eventually(
      "a write to be stored again",
      async () => {
        const r = await post("after-free");
        return r.status === 201 ? r : undefined;
      },
      20_000,
    );
    expect(res.status).toBe(201);
    await eventually(
      "the hub to say its store works again",
      () => hub.output.includes("hub store writes work again"),
      40_000,
    );
    // What arrived meanwhile is stored, then acknowledged: the outbox lets it go.
    await eventually(
      "the agent's report acknowledged",
      () => outboxOf(agent).ackedSeq >= (seq ?? Number.POSITIVE_INFINITY),
      20_000,
    );
    expect(storedPhase(agent.nodeName, during)).toBe("Running");
    expect(count(agent.output, "disconnected from the hub")).toBe(disconnects);
    expect(hub.proc?.exitCode).toBeNull();
    checkHubFiles();
  }, 180_000);
});
