import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import YAML from "yaml";
import { containerLogPath } from "../../../src/agent/logs/index.ts";
import type { Event } from "../../../src/api/types.ts";
import {
  describeCommand,
  execCommand,
  getCommand,
  logsCommand,
} from "../../../src/cli/commands.ts";
import { UsageError } from "../../../src/cli/errors.ts";
import type { CliIO } from "../../../src/cli/io.ts";
import { makePod } from "../../lib/builders.ts";
import {
  cri,
  type FakeAgent,
  runningStatus,
  startFakeAgent,
  writeLog,
} from "../server/fixtures.ts";

const now = Date.parse("2024-01-01T01:00:00Z");
const web = makePod({
  name: "web",
  status: { phase: "Running", containerStatuses: [runningStatus("app")] },
});
const sys = makePod({
  name: "proxy",
  namespace: "kube-system",
  status: { phase: "Running", containerStatuses: [runningStatus("app")] },
});
const started: Event = {
  apiVersion: "v1",
  kind: "Event",
  metadata: { name: "web.1", namespace: "default" },
  involvedObject: { kind: "Pod", namespace: "default", name: "web", uid: web.metadata.uid },
  reason: "Started",
  message: "Started container app",
  type: "Normal",
  source: { component: "fleetlet", host: "dev1" },
  count: 1,
  firstTimestamp: "2024-01-01T00:59:00Z",
  lastTimestamp: "2024-01-01T00:59:00Z",
};

let agent: FakeAgent;
beforeAll(async () => {
  agent = await startFakeAgent([web, sys], { events: [started] });
  await writeLog(containerLogPath(agent.logsDir, web, "app", false) ?? "", cri("one") + cri("two"));
});
afterAll(() => agent.stop());

/** Runs a command against the fake agent (through FLEETLET_SOCKET), capturing its output. */
async function run(
  cmd: (argv: string[], io: CliIO) => Promise<number>,
  argv: string[],
  signal?: AbortSignal,
) {
  const out = { stdout: "", stderr: "", code: 0 };
  const io: CliIO = {
    stdout: (t) => {
      out.stdout += t;
    },
    stderr: (t) => {
      out.stderr += t;
    },
    env: { FLEETLET_SOCKET: agent.socketPath },
    now: () => now,
    ...(signal !== undefined && { signal }),
  };
  out.code = await cmd(argv, io);
  return out;
}

describe("fleetlet get", () => {
  test("get pods prints the default namespace's pods as kubectl's table", async () => {
    const r = await run(getCommand, ["pods"]);
    expect(r.stdout).toBe(
      "NAME   READY   STATUS    RESTARTS   AGE\nweb    1/1     Running   0          60m\n",
    );
  });

  test("get pods -A adds the NAMESPACE column; -n picks a namespace", async () => {
    const all = await run(getCommand, ["pods", "-A"]);
    expect(all.stdout.split("\n")[0]).toStartWith("NAMESPACE     NAME");
    expect(all.stdout).toContain("kube-system   proxy");
    const sysOnly = await run(getCommand, ["po", "-n", "kube-system"]);
    expect(sysOnly.stdout).toContain("proxy");
    expect(sysOnly.stdout).not.toContain("web");
  });

  test("get pods says there are no resources on stderr when none match", async () => {
    const r = await run(getCommand, ["pods", "-l", "app=nothing"]);
    expect(r.stdout).toBe("");
    expect(r.stderr).toBe("No resources found in default namespace.\n");
  });

  test("get pod NAME -o json|yaml prints the object; a list prints a kubectl List", async () => {
    const one = JSON.parse((await run(getCommand, ["pod", "web", "-o", "json"])).stdout);
    expect(one.metadata.name).toBe("web");
    const list = YAML.parse((await run(getCommand, ["pods", "-o", "yaml"])).stdout);
    expect(list.kind).toBe("List");
    expect(list.items.map((p: { metadata: { name: string } }) => p.metadata.name)).toEqual(["web"]);
  });

  test("get pod of a missing pod fails with kubectl's NotFound message", async () => {
    await expect(run(getCommand, ["pod", "nope"])).rejects.toThrow(
      'Error from server (NotFound): pods "nope" not found',
    );
  });

  test("get refuses unknown resources, flags and output formats", async () => {
    await expect(run(getCommand, ["secrets"])).rejects.toBeInstanceOf(UsageError);
    await expect(run(getCommand, ["pods", "--wat"])).rejects.toThrow("unknown flag: --wat");
    await expect(run(getCommand, ["pods", "-o", "xml"])).rejects.toThrow(
      'unable to match a printer suitable for the output format "xml"',
    );
  });

  test("get pods -w prints the table, keeps watching, and exits 0 when stopped", async () => {
    const stop = new AbortController();
    const watching = run(getCommand, ["pods", "-w"], stop.signal);
    await Bun.sleep(100);
    stop.abort();
    const r = await watching;
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(
      "NAME   READY   STATUS    RESTARTS   AGE\nweb    1/1     Running   0          60m\n",
    );
  });

  test("get pod NAME -w -o json prints that pod's object as it changes", async () => {
    const stop = new AbortController();
    const watching = run(
      getCommand,
      ["pod", "proxy", "-n", "kube-system", "-w", "-o", "json"],
      stop.signal,
    );
    await Bun.sleep(100);
    stop.abort();
    const r = await watching;
    expect(JSON.parse(r.stdout).metadata.name).toBe("proxy");
  });

  test("get -w is for the agent's pods only", async () => {
    await expect(run(getCommand, ["events", "-w"])).rejects.toThrow("--watch is only for pods");
    await expect(run(getCommand, ["pods", "-w", "--hub", "http://127.0.0.1:1"])).rejects.toThrow(
      "--watch works against the local agent",
    );
  });

  test("get events prints LAST SEEN TYPE REASON OBJECT MESSAGE", async () => {
    const r = await run(getCommand, ["events"]);
    expect(r.stdout).toBe(
      "LAST SEEN   TYPE     REASON    OBJECT    MESSAGE\n60s         Normal   Started   pod/web   Started container app\n",
    );
    const json = JSON.parse((await run(getCommand, ["events", "-o", "json"])).stdout);
    expect(json.items[0].reason).toBe("Started");
  });
});

describe("fleetlet describe, logs, exec", () => {
  test("describe pod prints the pod with its events", async () => {
    const r = await run(describeCommand, ["pod", "web"]);
    expect(r.stdout).toStartWith("Name:         web\n");
    expect(r.stdout).toContain("  Normal  Started  60s   fleetlet  Started container app\n");
  });

  test("logs prints the container's log; --tail limits it", async () => {
    expect((await run(logsCommand, ["web"])).stdout).toBe("one\ntwo\n");
    expect((await run(logsCommand, ["web", "--tail", "1"])).stdout).toBe("two\n");
    expect((await run(logsCommand, ["web", "--tail=-1"])).stdout).toBe("one\ntwo\n");
  });

  test("exec prints stdout and stderr and returns the command's exit code", async () => {
    const ok = await run(execCommand, ["web", "--", "echo", "hi"]);
    expect(ok).toEqual({ stdout: "ran echo hi\n", stderr: "warn\n", code: 0 });
    const failed = await run(execCommand, ["web", "-c", "app", "--", "false"]);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toBe("warn\ncommand terminated with exit code 1\n");
  });

  test("exec without -- or without a command is a usage error", async () => {
    await expect(run(execCommand, ["web", "ls"])).rejects.toThrow("use exec [POD] -- [COMMAND]");
    await expect(run(execCommand, ["web", "--"])).rejects.toThrow(
      'exec needs a command after "--"',
    );
  });

  test("--socket overrides FLEETLET_SOCKET, and an absent agent is one clear error", async () => {
    await expect(run(getCommand, ["pods", "--socket", "/nonexistent/agent.sock"])).rejects.toThrow(
      "cannot reach the fleetlet agent at /nonexistent/agent.sock: is `fleetlet agent` running?",
    );
  });
});
