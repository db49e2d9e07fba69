// The kubectl-like commands against a running agent: get pods (table, wide, json, yaml, -w),
// get pod, describe, logs (container, tail, previous, follow), exec (output and exit code), get
// events, $FLEETLET_SOCKET, and the error when no agent answers. The compiled binary against the test
// bed's containerd. Needs root and the test bed (scripts/test starts both).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import YAML from "yaml";
import type { Pod } from "../../src/api/types.ts";
import { TestAgent } from "../lib/agent.ts";
import { eventually, fleetletBin, inSubnet } from "../lib/testbed.ts";

const agent = new TestAgent();
const img = agent.tb.busybox;
const full = (name: string) => `${name}-${agent.nodeName}`;

function ctr(name: string, command: string, extra = ""): string {
  return `    - name: ${name}\n      image: ${img}\n      command: ["sh", "-c", ${JSON.stringify(command)}]\n${extra}`;
}

function pod(name: string, spec: string): string {
  return `apiVersion: v1\nkind: Pod\nmetadata:\n  name: ${name}\n  labels:\n    app: ${name}\nspec:\n  terminationGracePeriodSeconds: 1\n${spec}`;
}

/** Runs the CLI with the socket from $FLEETLET_SOCKET only. */
function cliEnv(args: string[], socket = agent.socket) {
  const p = Bun.spawnSync([fleetletBin, ...args], {
    env: { ...process.env, FLEETLET_SOCKET: socket },
    stdout: "pipe",
    stderr: "pipe",
  });
  return { code: p.exitCode, stdout: p.stdout.toString(), stderr: p.stderr.toString() };
}

beforeAll(async () => {
  await agent.start();
  agent.writeManifest(
    "talk.yaml",
    pod(
      "talk",
      `  containers:\n${ctr("a", "for i in 1 2 3 4 5; do echo a$i; done; sleep 3600")}${ctr("b", "echo b1; sleep 3600")}`,
    ),
  );
  agent.writeManifest(
    "twice.yaml",
    pod(
      "twice",
      `  volumes:\n    - name: s\n      emptyDir: {}\n  containers:\n${ctr(
        "c",
        "if [ -f /s/done ]; then echo second; exec sleep 3600; fi; touch /s/done; echo first; exit 1",
        "      volumeMounts: [{ name: s, mountPath: /s }]\n",
      )}`,
    ),
  );
  agent.writeManifest(
    "ticker.yaml",
    pod(
      "ticker",
      `  containers:\n${ctr("t", "i=0; while true; do i=$((i+1)); echo tick$i; sleep 0.2; done")}`,
    ),
  );
  for (const name of ["talk", "ticker"]) {
    await agent.waitPod(name, "Running", (p) => p.status?.phase === "Running");
  }
  await agent.waitPod("twice", "restarted and running", (p) => {
    const s = p.status?.containerStatuses?.[0];
    return s?.restartCount === 1 && s.state.running !== undefined;
  });
}, 60_000);
afterAll(() => agent.cleanup(), 60_000);

describe("fleetlet get (needs root and the test bed)", () => {
  test("get pods -o wide adds the pod IP and node columns", () => {
    const r = agent.cli(["get", "pods", "-o", "wide"]);
    expect(r.code).toBe(0);
    const [header, ...rows] = r.stdout.trim().split("\n");
    expect(header).toMatch(
      /^NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\s+IP\s+NODE\s+NOMINATED NODE\s+READINESS GATES$/,
    );
    const talk = rows.find((l) => l.startsWith(full("talk")));
    expect(talk).toMatch(
      new RegExp(
        `^${full("talk")}\\s+2/2\\s+Running\\s+0\\s+\\d+s\\s+([\\d.]+)\\s+${agent.nodeName}\\s+<none>\\s+<none>$`,
      ),
    );
    const ip = /\s(\d+\.\d+\.\d+\.\d+)\s/.exec(talk ?? "")?.[1] ?? "";
    expect(inSubnet(ip, agent.tb.cniSubnet)).toBe(true);
    const twice = rows.find((l) => l.startsWith(full("twice")));
    expect(twice).toMatch(/\s1\/1\s+Running\s+1 \(\d+s ago\)\s/);
  }, 30_000);

  test("get pods -o json prints a v1 List of Pods, and get pod NAME -o json one Pod", () => {
    const list = JSON.parse(agent.cli(["get", "pods", "-o", "json"]).stdout);
    expect(list.apiVersion).toBe("v1");
    expect(list.kind).toBe("List");
    const names = (list.items as Pod[]).map((p) => p.metadata.name).sort();
    expect(names).toEqual([full("talk"), full("ticker"), full("twice")]);
    for (const p of list.items as Pod[]) expect([p.apiVersion, p.kind]).toEqual(["v1", "Pod"]);
    const one = JSON.parse(agent.cli(["get", "pod", full("talk"), "-o", "json"]).stdout) as Pod;
    expect([one.apiVersion, one.kind, one.metadata.name]).toEqual(["v1", "Pod", full("talk")]);
    expect(one.status?.containerStatuses?.map((c) => c.name)).toEqual(["a", "b"]);
  }, 30_000);

  test("get pods -o yaml prints the same list as YAML", () => {
    const doc = YAML.parse(agent.cli(["get", "pods", "-o", "yaml"]).stdout);
    expect(doc.kind).toBe("List");
    expect((doc.items as Pod[]).find((p) => p.metadata.name === full("ticker"))?.kind).toBe("Pod");
  }, 30_000);

  test("get pod NAME prints one row; an unknown name is kubectl's NotFound", () => {
    const r = agent.cli(["get", "pod", full("talk")]);
    expect(r.code).toBe(0);
    expect(r.stdout.trim().split("\n")).toHaveLength(2);
    const missing = agent.cli(["get", "pod", "nope"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe('fleetlet: Error from server (NotFound): pods "nope" not found\n');
  }, 30_000);

  test("get events lists the pods' events with kubectl's columns", () => {
    const r = agent.cli(["get", "events"]);
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split("\n");
    expect(lines[0]).toMatch(/^LAST SEEN\s+TYPE\s+REASON\s+OBJECT\s+MESSAGE$/);
    expect(r.stdout).toMatch(
      new RegExp(`Normal\\s+Started\\s+pod/${full("talk")}\\s+Started container a`),
    );
    const only = agent.cli([
      "get",
      "events",
      "--field-selector",
      `involvedObject.name=${full("twice")}`,
    ]);
    const rows = only.stdout.trim().split("\n").slice(1);
    expect(rows.length).toBeGreaterThanOrEqual(3);
    for (const row of rows) expect(row).toContain(`pod/${full("twice")}`);
    expect(only.stdout).toMatch(/Normal\s+Created\s+\S+\s+Created container: c$/m);
  }, 30_000);
  test("get pods -w prints a row for a new pod as it starts, then as it goes away", async () => {
    const proc = Bun.spawn(
      [fleetletBin, "get", "pods", "-w", "-l", "app=watched", "--socket", agent.socket],
      { stdout: "pipe", stderr: "pipe" },
    );
    let out = "";
    const reader = (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of proc.stdout) out += decoder.decode(chunk);
    })();
    // No pod matches yet: nothing printed, and the watch stays open.
    await Bun.sleep(300);
    expect(out).toBe("");
    expect(proc.exitCode).toBeNull();
    agent.writeManifest("watched.yaml", pod("watched", `  containers:\n${ctr("w", "sleep 3600")}`));
    const rows = (text: string) => text.split("\n").filter((l) => l.startsWith(full("watched")));
    await eventually(
      "a Running row",
      () => rows(out).some((l) => / 1\/1 +Running /.test(l)),
      30_000,
    );
    expect(out.split("\n")[0]).toMatch(/^NAME +READY +STATUS +RESTARTS +AGE$/);
    // Its first row came before it was running (ContainerCreating or Pending).
    expect(rows(out)[0]).toMatch(/ 0\/1 +(ContainerCreating|Pending) /);
    agent.removeManifest("watched.yaml");
    await eventually(
      "a Terminating row",
      () => rows(out).some((l) => / Terminating /.test(l)),
      30_000,
    );
    const printed = rows(out).length;
    await eventually(
      "the watch to see the pod gone",
      async () => {
        const list = agent.cli(["get", "pods", "-l", "app=watched"]);
        return list.stderr.includes("No resources found") && rows(out).length > printed;
      },
      30_000,
    );
    expect(proc.exitCode).toBeNull();
    proc.kill("SIGTERM");
    await proc.exited;
    await reader;
  }, 60_000);
});

describe("the agent's /metrics (needs root and the test bed)", () => {
  test("reports pods by phase, PLEG relists, and the process's memory, heap and CPU", async () => {
    const text = await (await agent.request("/metrics")).text();
    const value = (series: string) => {
      const line = text.split("\n").find((l) => l.startsWith(`${series} `));
      return line === undefined ? undefined : Number(line.slice(series.length + 1));
    };
    expect(value('fleetlet_pods{phase="Running"}')).toBeGreaterThanOrEqual(2);
    expect(value("fleetlet_pleg_relists_total")).toBeGreaterThan(0);
    expect(text).toContain("# TYPE process_resident_memory_bytes gauge\n");
    expect(text).toContain("# TYPE process_cpu_seconds_total counter\n");
    const pid = agent.proc?.pid as number;
    const vmRss = /VmRSS:\s+(\d+) kB/.exec(await Bun.file(`/proc/${pid}/status`).text());
    const rss = value("process_resident_memory_bytes") as number;
    // The same process: within a quarter of what the kernel reports a moment later.
    expect(Math.abs(rss - Number(vmRss?.[1]) * 1024)).toBeLessThan(rss / 4);
    const heap = value("fleetlet_js_heap_bytes") as number;
    expect(heap).toBeGreaterThan(1e6);
    expect(heap).toBeLessThan(rss);
    const cpu = value("process_cpu_seconds_total") as number;
    expect(cpu).toBeGreaterThan(0);
    const stat = (await Bun.file(`/proc/${pid}/stat`).text()).split(") ")[1]?.split(" ") ?? [];
    const ticks = (Number(stat[11]) + Number(stat[12])) / 100;
    expect(cpu).toBeLessThanOrEqual(ticks + 0.5);
  });
});

describe("fleetlet describe (needs root and the test bed)", () => {
  test("describe pod prints the pod's sections and its events", () => {
    const r = agent.cli(["describe", "pod", full("twice")]);
    expect(r.code).toBe(0);
    for (const line of [
      new RegExp(`^Name:\\s+${full("twice")}$`, "m"),
      /^Namespace:\s+default$/m,
      new RegExp(`^Node:\\s+${agent.nodeName}`, "m"),
      /^Status:\s+Running$/m,
      /^IP:\s+\d+\.\d+\.\d+\.\d+$/m,
      /^Containers:$/m,
      /^ {4}State:\s+Running$/m,
      /^ {4}Last State:\s+Terminated$/m,
      /^ {6}Exit Code:\s+1$/m,
      /^ {4}Restart Count:\s+1$/m,
      /^Conditions:$/m,
      /^Volumes:$/m,
      /^QoS Class:\s+BestEffort$/m,
      /^Events:$/m,
      /Normal\s+Started\s+\d+s \(x2 over \d+s\)\s+fleetlet\s+Started container c$/m,
    ]) {
      expect(r.stdout).toMatch(line);
    }
    const ip = /^IP:\s+(\S+)$/m.exec(r.stdout)?.[1] ?? "";
    expect(inSubnet(ip, agent.tb.cniSubnet)).toBe(true);
  }, 30_000);
});

describe("fleetlet logs (needs root and the test bed)", () => {
  test("logs -c picks the container, --tail the last lines", () => {
    expect(agent.cli(["logs", full("talk"), "-c", "b"]).stdout).toBe("b1\n");
    expect(agent.cli(["logs", full("talk"), "-c", "a"]).stdout).toBe("a1\na2\na3\na4\na5\n");
    expect(agent.cli(["logs", full("talk"), "-c", "a", "--tail", "2"]).stdout).toBe("a4\na5\n");
  }, 30_000);

  test("logs of a pod with two containers and no -c names the choices", () => {
    const r = agent.cli(["logs", full("talk")]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("a container name must be specified");
    expect(r.stderr).toContain("[a b]");
  }, 30_000);

  test("logs --previous prints the run before the restart", () => {
    expect(agent.cli(["logs", full("twice")]).stdout).toBe("second\n");
    expect(agent.cli(["logs", full("twice"), "--previous"]).stdout).toBe("first\n");
  }, 30_000);

  test("logs -f keeps printing new lines until it is killed", async () => {
    const proc = Bun.spawn([fleetletBin, "logs", full("ticker"), "-f", "--socket", agent.socket], {
      stdout: "pipe",
      stderr: "pipe",
    });
    let out = "";
    const reader = (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of proc.stdout) out += decoder.decode(chunk);
    })();
    const first = await eventually("a first line", () => (out.includes("tick") ? out : undefined));
    const count = (s: string) => s.split("\n").filter((l) => l.startsWith("tick")).length;
    await eventually("new lines to arrive", () => count(out) > count(first) + 3, 10_000);
    expect(proc.exitCode).toBeNull();
    proc.kill("SIGTERM");
    await proc.exited;
    await reader;
    const numbers = out
      .trim()
      .split("\n")
      .map((l) => Number(l.slice(4)));
    expect(numbers).toEqual(numbers.map((_, i) => (numbers[0] as number) + i));
  }, 30_000);
});

describe("fleetlet exec (needs root and the test bed)", () => {
  test("exec prints the command's output and exits with its code", () => {
    const ok = agent.cli(["exec", full("talk"), "-c", "b", "--", "echo", "hi there"]);
    expect([ok.code, ok.stdout]).toEqual([0, "hi there\n"]);
    const r = agent.cli([
      "exec",
      full("talk"),
      "-c",
      "b",
      "--",
      "sh",
      "-c",
      "echo oops >&2; exit 4",
    ]);
    expect(r.code).toBe(4);
    expect(r.stderr).toBe("oops\ncommand terminated with exit code 4\n");
  }, 30_000);
});

describe("the CLI's socket (needs root and the test bed)", () => {
  test("$FLEETLET_SOCKET names the agent's socket", () => {
    const r = cliEnv(["get", "pods"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(full("talk"));
  }, 30_000);

  test("with no agent listening, one clear line and exit code 1", () => {
    const socket = `${agent.dir}/nobody.sock`;
    const r = cliEnv(["get", "pods"], socket);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toBe(
      `fleetlet: cannot reach the fleetlet agent at ${socket}: is \`fleetlet agent\` running?\n`,
    );
  }, 30_000);
});
