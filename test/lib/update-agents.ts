// A device's agent spoken at the protocol level (ProtocolClient) that announces "updates", for the
// e2e tests of agent updates and rollouts through the compiled hub or its replicas: joined at one
// hub, connected to one hub (its CA trusted when it serves TLS), it records the `update` offers it
// gets and sends update.status as the test tells it. It never downloads nor runs a release. While
// connected it sends a heartbeat every 2 s, so a test longer than the hub's offline time (3
// heartbeat intervals) does not see it go offline.
import { expect } from "bun:test";
import type { UpdatePhase } from "../../src/protocol/index.ts";
import { nodeReport, ProtocolClient, type TestHub } from "./hub.ts";
import { eventually } from "./testbed.ts";

export class UpdateAgent {
  client: ProtocolClient | undefined;
  credential = "";
  /** How far its clock is from this machine's (ms), as its heartbeats say. */
  clockOffsetMs = 0;
  private beat: ReturnType<typeof setInterval> | undefined;

  constructor(
    readonly name: string,
    readonly labels: Record<string, string>,
  ) {}

  /** Joins at `hub` with a join token carrying its labels. */
  async join(hub: TestHub): Promise<void> {
    const res = await hub.join(await hub.joinToken("1h", this.labels), this.name);
    expect(res.status).toBe(200);
    this.credential = ((await res.json()) as { credential: string }).credential;
  }

  /** Connects to `hub`, says hello running `version` with the "updates" feature, is welcomed
   * and reports its Node (this machine's arch, kubelet fleetlet/`version`). */
  async connect(hub: TestHub, version = "0.1.0"): Promise<void> {
    this.close();
    const c = new ProtocolClient(hub.url, this.credential, hub.tls ? hub.caPem : undefined);
    this.client = c;
    await c.opened;
    c.send({
      type: "hello",
      protocolVersion: 1,
      nodeName: this.name,
      agentVersion: version,
      streamId: `s-${Date.now()}`,
      features: ["updates"],
    });
    await c.waitFor("welcome");
    c.send(nodeReport(this.name, version));
    const beat = () => c.send({ type: "hb", clock: Date.now() + this.clockOffsetMs });
    beat();
    this.beat = setInterval(beat, 2000);
  }

  /** The versions offered (`update` messages) on its current connection, in order. */
  offers(): string[] {
    return (this.client?.received ?? [])
      .filter((m) => m.type === "update")
      .map((m) => String(m.version));
  }

  waitOffer(version: string, timeoutMs = 5000): Promise<true> {
    return eventually(
      `an offer of ${version} to ${this.name}`,
      () => this.offers().includes(version) || undefined,
      timeoutMs,
      50,
    );
  }

  /** Sends update.status of `version` in `phase`. */
  report(version: string, phase: UpdatePhase, more: { bytes?: number; total?: number } = {}) {
    this.client?.send({ type: "update.status", version, phase, ...more });
  }

  /** Sends a health report collected at `collectedAt`. */
  health(collectedAt: number): void {
    this.client?.send({
      type: "health",
      health: { collectedAt, temperatures: [], filesystems: [], interfaces: [] },
    });
  }

  close(): void {
    clearInterval(this.beat);
    this.client?.close();
    this.client = undefined;
  }
}

/** Waits until `hub` knows the arch of `agent`'s node (its Node report reached that hub's view). */
export function archKnownAt(hub: TestHub, agent: UpdateAgent, timeoutMs = 30_000) {
  return eventually(
    `the arch of ${agent.name} at ${hub.url}`,
    async () => {
      const res = await hub.api(`/api/v1/nodes/${agent.name}/update`);
      return res.status === 200 && ((await res.json()) as { arch?: string }).arch;
    },
    timeoutMs,
  );
}
