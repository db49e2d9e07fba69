// A hub serving HTTPS with its own CA, and a real agent joined to it with only the join token,
// running one pod of three containers (a ticking logger, httpd, one that restarts every second),
// for the e2e tests of logs, exec and port-forward through the hub; and a device at the protocol
// level. Call setup() in beforeAll and cleanup() in afterAll.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Pod } from "../../src/api/types.ts";
import { TestAgent } from "./agent.ts";
import { ProtocolClient, TestHub } from "./hub.ts";
import { Background, run } from "./processes.ts";
import { eventually, fleetletBin } from "./testbed.ts";

const manifest = (img: string) => `apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: main
      image: ${img}
      command: ["sh", "-c", "i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.3; done"]
    - name: http
      image: ${img}
      command: ["httpd", "-f", "-p", "8080", "-h", "/etc"]
    - name: crash
      image: ${img}
      command: ["sh", "-c", "echo run $(cat /proc/uptime); sleep 1; exit 1"]
`;

export class StreamsFixture {
  readonly hub = new TestHub(
    ["--heartbeat-interval", "1s", "--max-streams-per-node", "4"],
    "127.0.0.1",
    true,
  );
  private readonly agentArgs = [
    "--hub-reconnect-back-off-base",
    "200ms",
    "--hub-reconnect-back-off-max",
    "1s",
    "--node-status-update-frequency",
    "1s",
  ];
  readonly agent = new TestAgent({ args: this.agentArgs });
  /** KUBECONFIG, FLEETLET_HUB_TOKEN and FLEETLET_HUB_CA for commands against the hub. */
  env: Record<string, string> = {};

  /** The pod's name on the hub. */
  get pod(): string {
    return `web-${this.agent.nodeName}`;
  }

  async setup(): Promise<void> {
    const { hub, agent } = this;
    await hub.start();
    const kubeconfig = join(hub.dataDir, "kubeconfig");
    const kc = await run([
      fleetletBin,
      "hub",
      "kubeconfig",
      "--hub",
      hub.url,
      "--data",
      hub.dataDir,
    ]);
    if (kc.code !== 0) throw new Error(`hub kubeconfig: ${kc.stderr}`);
    writeFileSync(kubeconfig, kc.stdout);
    this.env = {
      KUBECONFIG: kubeconfig,
      FLEETLET_HUB_TOKEN: hub.operatorToken,
      FLEETLET_HUB_CA: join(hub.dataDir, "tls", "ca.crt"),
    };
    this.agentArgs.push("--hub", hub.url, "--join-token", await hub.joinToken());
    agent.writeManifest("web.yaml", manifest(agent.tb.busybox));
    await agent.start();
    await eventually(
      "the pod running in the hub, its crash container restarted once",
      async () => {
        const p = await this.hubJson<Pod>(`/api/v1/namespaces/default/pods/${this.pod}`);
        const crash = p?.status?.containerStatuses?.find((c) => c.name === "crash");
        const main = p?.status?.containerStatuses?.find((c) => c.name === "main");
        return main?.state.running !== undefined && (crash?.restartCount ?? 0) >= 1 ? p : undefined;
      },
      40_000,
      200,
    );
  }

  async cleanup(): Promise<void> {
    await this.agent.cleanup();
    await this.hub.cleanup();
  }

  async hubJson<T>(path: string): Promise<T | undefined> {
    const res = await this.hub.api(path);
    return res.status === 200 ? ((await res.json()) as T) : undefined;
  }

  /** `fleetlet ARGS --hub URL` with the operator's token and the hub's CA. */
  fleetlet(...args: string[]) {
    return run([fleetletBin, ...args, "--hub", this.hub.url], { env: this.env });
  }

  /** Runs `BIN logs -f POD -c main --tail 1 EXTRA...` (kubectl or fleetlet) until it has shown
   * three lines written after its first. */
  async followSeesNewLines(bin: string, ...extra: string[]): Promise<void> {
    const cmd = [bin, "logs", "-f", this.pod, "-c", "main", "--tail", "1", ...extra];
    const follow = new Background(cmd, this.env);
    try {
      const first = Number((await follow.waitFor(/tick (\d+)/, "a first line"))[1]);
      await follow.waitFor(new RegExp(`tick ${first + 3}\\b`), "three new lines");
    } finally {
      await follow.stop();
    }
  }

  /** A device at the protocol level, announcing streams, with one pod `p-NAME`. */
  async fakeDevice(name: string): Promise<ProtocolClient> {
    const { hub } = this;
    const c = new ProtocolClient(hub.url, await hub.credentialFor(name), hub.caPem);
    await c.opened;
    c.send({
      type: "hello",
      protocolVersion: 1,
      nodeName: name,
      agentVersion: "test",
      streamId: "s1",
      features: ["streams"],
    });
    await c.waitFor("welcome");
    const uid = `u-${name}`;
    const p = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: `p-${name}`, namespace: "default", uid },
      spec: { containers: [{ name: "c", image: "x" }] },
      status: { phase: "Running" },
    };
    c.send({ type: "pod.upsert", seq: 1, uid, pod: p });
    await eventually(
      "the fake pod in the hub",
      () => this.hubJson(`/api/v1/namespaces/default/pods/p-${name}`),
      5000,
      20,
    );
    return c;
  }

  /** GET the follow of the fake device `name`'s pod log. */
  logsOf(name: string): Promise<Response> {
    return this.hub.api(`/api/v1/namespaces/default/pods/p-${name}/log?follow=true`);
  }
}
