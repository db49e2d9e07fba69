// Runs the compiled `fleetlet hub` with its own data dir on a free loopback port, and speaks the
// agent protocol at the message level (ProtocolClient) so tests can send what an agent would,
// or what a broken or hostile one would.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Pod } from "../../src/api/types.ts";
import { eventually, fleetletBin } from "./testbed.ts";

export class TestHub {
  readonly dataDir: string;
  /** sha256:<hex> of the hub's own CA (TLS hubs). */
  caHash = "";
  proc: ReturnType<typeof Bun.spawn> | undefined;
  url = "";
  operatorToken = "";
  output = "";
  /** The port of the first start (0: any free one). A hub restarted while agents dial it needs
   * one outside the ephemeral range, or a dialing socket may take the port (TCP self-connect). */
  port = 0;

  /**
   * `host`: the address to listen on (default 127.0.0.1). `tls`: HTTPS with the hub's own CA (in
   * dataDir/tls); plain HTTP otherwise, which the hub allows on loopback only (so a hub on
   * another address always has TLS).
   */
  constructor(
    private readonly args: string[] = [],
    private readonly host = "127.0.0.1",
    readonly tls = !host.startsWith("127."),
  ) {
    this.dataDir = mkdtempSync(join(tmpdir(), "fleetlet-hub-e2e-"));
  }

  /** The hub's CA (PEM), for clients of a TLS hub. */
  get caPem(): string {
    return readFileSync(join(this.dataDir, "tls", "ca.crt"), "utf8");
  }

  /** Starts the hub (again, on the same data dir and port after a stop); waits `timeoutMs` for
   * it to listen. */
  async start(timeoutMs = 10_000): Promise<void> {
    const port = this.url === "" ? String(this.port) : new URL(this.url).port;
    this.output = "";
    const proc = Bun.spawn(
      [
        fleetletBin,
        "hub",
        "--data",
        this.dataDir,
        "--listen",
        `${this.host}:${port}`,
        ...(this.tls ? [] : ["--plain-http"]),
        ...this.args,
      ],
      { stdout: "pipe", stderr: "pipe" },
    );
    this.proc = proc;
    const read = async (s: ReadableStream<Uint8Array>) => {
      for await (const chunk of s) this.output += new TextDecoder().decode(chunk);
    };
    void read(proc.stdout);
    void read(proc.stderr);
    const url = await eventually(
      "the hub to listen",
      () => /hub listening url=(\S+)/.exec(this.output)?.[1],
      timeoutMs,
      50,
    );
    this.url = url;
    this.caHash = /hub CA hash=(\S+)/.exec(this.output)?.[1] ?? "";
    const token = /operator token[^\n]*\n(flo_\S+)/.exec(this.output)?.[1];
    if (token !== undefined) this.operatorToken = token;
  }

  async stop(): Promise<void> {
    this.proc?.kill("SIGTERM");
    await this.proc?.exited;
    this.proc = undefined;
  }

  async kill(): Promise<void> {
    this.proc?.kill("SIGKILL");
    await this.proc?.exited;
    this.proc = undefined;
  }

  /** An operator API call. */
  /** Waits until the hub shows node `node`'s static pod `name` (named `<name>-<node>`) Running. */
  runningPod(node: string, name: string): Promise<Pod> {
    return eventually(
      `pod ${name} running in the hub`,
      async () => {
        const res = await this.api(`/api/v1/pods?nodeName=${node}`);
        if (res.status !== 200) return undefined;
        const { items } = (await res.json()) as { items: Pod[] };
        return items.find(
          (p) => p.metadata.name === `${name}-${node}` && p.status?.phase === "Running",
        );
      },
      30_000,
      100,
    );
  }

  api(path: string, init: RequestInit = {}, token = this.operatorToken): Promise<Response> {
    const headers = new Headers(init.headers);
    if (token !== "") headers.set("authorization", `Bearer ${token}`);
    return fetch(this.url + path, { ...init, headers, ...this.fetchTls() });
  }

  /** fetch options trusting this hub's CA (none for a plain HTTP hub). */
  fetchTls(): RequestInit {
    return (this.tls ? { tls: { ca: this.caPem } } : {}) as RequestInit;
  }

  async joinToken(ttl = "1h", labels: Record<string, string> = {}): Promise<string> {
    const res = await this.api("/api/v1/join-tokens", {
      method: "POST",
      body: JSON.stringify({ ttl, labels }),
    });
    if (res.status !== 201) throw new Error(`join-tokens: HTTP ${res.status}: ${await res.text()}`);
    return ((await res.json()) as { token: string }).token;
  }

  join(joinToken: string, nodeName: string): Promise<Response> {
    return fetch(`${this.url}/api/v1/join`, {
      method: "POST",
      body: JSON.stringify({ joinToken, nodeName }),
      ...this.fetchTls(),
    });
  }

  /** Joins `nodeName` with a fresh join token; returns its credential. */
  async credentialFor(nodeName: string): Promise<string> {
    const res = await this.join(await this.joinToken(), nodeName);
    if (res.status !== 200)
      throw new Error(`join ${nodeName}: HTTP ${res.status}: ${await res.text()}`);
    return ((await res.json()) as { credential: string }).credential;
  }

  async cleanup(): Promise<void> {
    await this.kill();
    rmSync(this.dataDir, { recursive: true, force: true });
  }
}

/** One agent connection at the protocol level: every received message and the close, recorded. */
export class ProtocolClient {
  readonly received: Record<string, unknown>[] = [];
  /** Binary frames received (stream data). */
  readonly binary: Uint8Array[] = [];
  closed: { code: number; reason: string } | undefined;
  private readonly ws: WebSocket;
  readonly opened: Promise<void>;

  /** `ca`: the hub's CA, for a TLS hub. */
  constructor(hubUrl: string, credential: string | undefined, ca?: string) {
    const url = `${hubUrl.replace(/^http/, "ws")}/api/v1/agent/connect`;
    const headers: Record<string, string> =
      credential === undefined ? {} : { authorization: `Bearer ${credential}` };
    this.ws = new WebSocket(url, { headers, ...(ca !== undefined && { tls: { ca } }) } as never);
    this.ws.binaryType = "arraybuffer";
    this.ws.onmessage = (e) => {
      if (typeof e.data === "string") this.received.push(JSON.parse(e.data));
      else this.binary.push(new Uint8Array(e.data as ArrayBuffer));
    };
    this.ws.onclose = (e) => {
      this.closed = { code: e.code, reason: e.reason };
    };
    this.opened = new Promise((resolve, reject) => {
      this.ws.onopen = () => resolve();
      this.ws.onerror = () => reject(new Error(`cannot connect to ${url}`));
    });
  }

  send(msg: unknown): void {
    this.ws.send(typeof msg === "string" ? msg : JSON.stringify(msg));
  }

  sendBinary(data: Uint8Array): void {
    this.ws.send(data);
  }

  /** Waits for a received message of `type`. */
  waitFor(type: string, timeoutMs = 5000): Promise<Record<string, unknown>> {
    return eventually(
      `a ${type} message`,
      () => this.received.find((m) => m.type === type),
      timeoutMs,
      10,
    );
  }

  waitClosed(timeoutMs = 5000): Promise<{ code: number; reason: string }> {
    return eventually("the connection to close", () => this.closed, timeoutMs, 10);
  }

  close(): void {
    this.ws.close();
  }
}

/** This machine's arch as a Node reports it. */
export const nodeArch = process.arch === "x64" ? "amd64" : "arm64";

/**
 * The first `node` message of an agent of fleetlet `version` on node `name` (this machine's
 * arch; Ready when `ready`), as a protocol-level device sends it after its welcome.
 */
export function nodeReport(name: string, version = "0.1.0", ready = false) {
  return {
    type: "node",
    seq: 1,
    node: {
      apiVersion: "v1",
      kind: "Node",
      metadata: { name },
      spec: {},
      status: {
        ...(ready && { conditions: [{ type: "Ready", status: "True", reason: "KubeletReady" }] }),
        nodeInfo: {
          machineID: "m",
          systemUUID: "u",
          bootID: "b",
          kernelVersion: "6.1.0",
          osImage: "Debian GNU/Linux 12 (bookworm)",
          containerRuntimeVersion: "containerd://1.6.20",
          kubeletVersion: `fleetlet/${version}`,
          kubeProxyVersion: "",
          operatingSystem: "linux",
          architecture: nodeArch,
        },
      },
    },
  };
}
