// `fleetlet attach` on the device and `kubectl attach` (or `fleetlet attach --hub` where kubectl
// is not installed) through the compiled hub, against the real containerd: a shell with stdin and
// a terminal, output streamed from a running process, stdinOnce ending the container's stdin,
// and the refusals (a container that is not running, -i to a container without stdin). Needs
// root and the test bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Pod } from "../../src/api/types.ts";
import { TestAgent } from "../lib/agent.ts";
import { TestHub } from "../lib/hub.ts";
import { Background, run, underPty } from "../lib/processes.ts";
import { eventually, fleetletBin } from "../lib/testbed.ts";

const manifest = (img: string) => `apiVersion: v1
kind: Pod
metadata: {name: att}
spec:
  terminationGracePeriodSeconds: 1
  initContainers:
    - {name: init, image: ${img}, command: ["true"]}
  containers:
    - {name: shell, image: ${img}, command: ["sh"], stdin: true, tty: true}
    - {name: hubshell, image: ${img}, command: ["sh"], stdin: true, tty: true}
    - name: ticker
      image: ${img}
      command: ["sh", "-c", "i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.2; done"]
    - name: once
      image: ${img}
      stdin: true
      stdinOnce: true
      command: ["sh", "-c", "while read l; do echo got $l; done; echo stdin-closed"]
`;

const hub = new TestHub(["--heartbeat-interval", "1s"], "127.0.0.1", true);
const agentArgs = ["--node-status-update-frequency", "1s"];
const agent = new TestAgent({ args: agentArgs });
const pod = () => `att-${agent.nodeName}`;
let env: Record<string, string> = {};
const kubectl = Bun.which("kubectl");

async function hubPod(): Promise<Pod | undefined> {
  const res = await hub.api(`/api/v1/namespaces/default/pods/${pod()}`);
  return res.status === 200 ? ((await res.json()) as Pod) : undefined;
}

const status = (p: Pod | undefined, name: string) =>
  p?.status?.containerStatuses?.find((c) => c.name === name);

beforeAll(async () => {
  await hub.start();
  const kc = await run([fleetletBin, "hub", "kubeconfig", "--hub", hub.url, "--data", hub.dataDir]);
  if (kc.code !== 0) throw new Error(`hub kubeconfig: ${kc.stderr}`);
  writeFileSync(join(hub.dataDir, "kubeconfig"), kc.stdout);
  env = {
    KUBECONFIG: join(hub.dataDir, "kubeconfig"),
    FLEETLET_HUB_TOKEN: hub.operatorToken,
    FLEETLET_HUB_CA: join(hub.dataDir, "tls", "ca.crt"),
  };
  agentArgs.push("--hub", hub.url, "--join-token", await hub.joinToken());
  agent.writeManifest("att.yaml", manifest(agent.tb.busybox));
  await agent.start();
  await eventually(
    "every container of the pod running, as the hub sees it",
    async () => {
      const p = await hubPod();
      const names = ["shell", "hubshell", "ticker", "once"];
      return names.every((n) => status(p, n)?.state.running !== undefined) ? p : undefined;
    },
    40_000,
    200,
  );
}, 90_000);
afterAll(async () => {
  await agent.cleanup();
  await hub.cleanup();
}, 60_000);

const attach = (...args: string[]) => [
  fleetletBin,
  "attach",
  pod(),
  "--socket",
  agent.socket,
  ...args,
];

describe("fleetlet attach and kubectl attach against containerd (needs root and the test bed)", () => {
  test("without stdinOnce the end of the client's stdin only detaches: the shell runs on", async () => {
    const r = await run(attach("-c", "shell", "-i", "-q"), { stdin: "echo hi\n" });
    expect(r.code).toBe(0);
    const ps = await run([
      fleetletBin,
      "exec",
      pod(),
      "-c",
      "shell",
      "--socket",
      agent.socket,
      "--",
      "cat",
      "/proc/1/cmdline",
    ]);
    expect(ps.stdout).toBe("sh\0");
    const p = await agent.pod("att");
    expect(status(p, "shell")?.state.running).toBeDefined();
    expect(status(p, "shell")?.restartCount).toBe(0);
  }, 20_000);

  test("attach -it on the device joins the shell under a terminal, resized with it, until the shell exits", async () => {
    const r = await underPty(
      attach("-c", "shell", "-i", "-t").join(" "),
      [
        { after: /try pressing enter/, type: "\r" },
        { after: /# /, type: "stty size; echo a$((40+2))b\r" },
        { after: /a42b/, type: "exit\r" },
      ],
      { cols: 90, rows: 20 },
    );
    expect(r.out).toContain("20 90");
    expect(r.out).toContain("a42b");
    expect(r.code).toBe(0);
  }, 30_000);

  test("attach without stdin streams the process's output from now on; -t to a container without a terminal is dropped with kubectl's warning", async () => {
    const bg = new Background(attach("-c", "ticker", "-t"));
    try {
      const first = Number((await bg.waitFor(/tick (\d+)/, "a first line"))[1]);
      await bg.waitFor(new RegExp(`tick ${first + 3}\\b`), "three lines more");
      expect(first).toBeGreaterThan(0);
      expect(bg.out).toContain(
        "error: Unable to use a TTY - container ticker did not allocate one",
      );
    } finally {
      await bg.stop();
    }
  }, 20_000);

  test("attach is refused for a container that is not running and for -i to a container without stdin", async () => {
    const init = await run(attach("-c", "init"));
    expect(init.code).toBe(1);
    expect(init.stderr).toContain(`container init is not running in pod ${pod()}`);
    const noStdin = await run(attach("-c", "ticker", "-i"), { stdin: "x\n" });
    expect(noStdin.code).toBe(1);
    expect(noStdin.stderr).toContain(
      `container ticker of pod ${pod()} has no stdin to attach to (its spec does not set stdin: true)`,
    );
  }, 20_000);

  test("with stdinOnce the end of the client's stdin closes the container's stdin (containerd's rule)", async () => {
    const r = await run(attach("-c", "once", "-i", "-q"), { stdin: "a\nb\n" });
    expect(r.stdout).toBe("got a\ngot b\nstdin-closed\n");
    expect(r.code).toBe(0);
  }, 20_000);

  test("attach -it through the hub (kubectl where installed, else fleetlet --hub) joins the shell, attach without -i streams output; the audit log shows it", async () => {
    const cmd =
      kubectl === null
        ? `${fleetletBin} attach ${pod()} -c hubshell -i -t --hub ${hub.url}`
        : `${kubectl} attach ${pod()} -c hubshell -i -t`;
    const r = await underPty(
      cmd,
      [
        { after: /try pressing enter/, type: "\r" },
        { after: /# /, type: "stty size; echo c$((50+5))d\r" },
        { after: /c55d/, type: "exit\r" },
      ],
      { env, cols: 70, rows: 15 },
    );
    expect(r.out).toContain("15 70");
    expect(r.out).toContain("c55d");
    expect(r.code).toBe(0);
    const follow = new Background(
      kubectl === null
        ? [fleetletBin, "attach", pod(), "-c", "ticker", "--hub", hub.url]
        : [kubectl, "attach", pod(), "-c", "ticker"],
      env,
    );
    try {
      const first = Number((await follow.waitFor(/tick (\d+)/, "a first line"))[1]);
      await follow.waitFor(new RegExp(`tick ${first + 3}\\b`), "three lines more");
    } finally {
      await follow.stop();
    }
    const audit = await run([fleetletBin, "hub", "audit", "--hub", hub.url], { env });
    expect(audit.stdout).toMatch(
      new RegExp(`attach\\s+${agent.nodeName}\\s+default/${pod()}\\s+hubshell\\s+-t \\(attach\\)`),
    );
  }, 30_000);
});
