// The launcher (deploy/fleetlet-launch, a POSIX shell script) with small shell scripts standing in
// for agent versions: which version it runs, a trial passed, three crashed starts and a trial
// past its limit rolled back by the launcher alone, a half-opened trial, no previous version,
// and a stop passed on to the agent on trial. Runs /bin/sh; no root.
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const LAUNCHER = join(import.meta.dir, "../../../../deploy/fleetlet-launch");
let root: string;
let dir: string;
/** What the stand-in agents wrote, one line per run: "<name> <args> trial=<FLEETLET_TRIAL>". */
let ran: string;

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), "fleetlet-launch-"));
  dir = join(root, "agent");
  ran = join(root, "ran");
  mkdirSync(join(dir, "versions"), { recursive: true });
  writeFileSync(join(root, "packaged"), agentScript("packaged", "exit 0"), { mode: 0o755 });
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

/** A stand-in agent: records its run, then runs `body`. */
function agentScript(name: string, body: string): string {
  return `#!/bin/sh\necho "${name} $* trial=\${FLEETLET_TRIAL:-}" >> '${ran}'\n${body}\n`;
}

function version(name: string, body: string): void {
  mkdirSync(join(dir, "versions", name));
  writeFileSync(join(dir, "versions", name, "fleetlet"), agentScript(name, body), { mode: 0o755 });
}

function link(name: "current" | "previous", to: string): void {
  symlinkSync(`versions/${to}`, join(dir, name));
}

async function launch(limit = 30): Promise<{ code: number; stderr: string }> {
  const p = Bun.spawn(
    [
      "/bin/sh",
      LAUNCHER,
      ...["--root-dir", root, "--packaged", join(root, "packaged"), "--trial-limit", String(limit)],
      "--",
      "agent",
      "--config",
      "c.yaml",
    ],
    { stdout: "pipe", stderr: "pipe" },
  );
  const [stderr, code] = await Promise.all([new Response(p.stderr).text(), p.exited]);
  return { code, stderr };
}

const runs = () => (existsSync(ran) ? readFileSync(ran, "utf8").trim().split("\n") : []);
const read = (name: string) => readFileSync(join(dir, name), "utf8").trim();
const healthy = (name: string) => `echo ${name} > '${join(root, "agent", "healthy")}'`;

describe("the launcher (runs /bin/sh; no root)", () => {
  test("with no version installed it runs the packaged executable with its arguments", async () => {
    expect((await launch()).code).toBe(0);
    expect(runs()).toEqual(["packaged agent --config c.yaml trial="]);
  });

  test("with no trial open it runs current's version", async () => {
    version("v1", "exit 7");
    link("current", "v1");
    expect((await launch()).code).toBe(7);
    expect(runs()).toEqual(["v1 agent --config c.yaml trial="]);
  });

  test("with no trial open, a healthy left behind (a cut as a trial closed) is removed: it would hold the agent's updates", async () => {
    version("v1", "exit 0");
    link("current", "v1");
    writeFileSync(join(dir, "healthy"), "v1\n");
    expect((await launch()).code).toBe(0);
    expect(runs()).toEqual(["v1 agent --config c.yaml trial="]);
    expect(existsSync(join(dir, "healthy"))).toBe(false);
  });

  test("a version that says it is healthy passes its trial; versions neither current nor previous go", async () => {
    for (const v of ["v0", "v1"]) version(v, "exit 0");
    version("v2", `${healthy("v2")}\nsleep 1\nexit 3`);
    link("previous", "v1");
    link("current", "v2");
    writeFileSync(join(dir, "trial"), "v2 0\n");
    const { code, stderr } = await launch();
    expect(code).toBe(3);
    expect(stderr).toContain("v2 passed its trial");
    expect(runs()).toEqual(["v2 agent --config c.yaml trial=v2"]);
    expect(existsSync(join(dir, "trial"))).toBe(false);
    expect(existsSync(join(dir, "healthy"))).toBe(false);
    expect(existsSync(join(dir, "versions", "v0"))).toBe(false);
    expect(existsSync(join(dir, "versions", "v1", "fleetlet"))).toBe(true);
  });

  test("three crashed starts on trial: the fourth start puts the previous version back and runs it", async () => {
    version("v1", "exit 0");
    version("v2", "exit 1");
    link("previous", "v1");
    link("current", "v2");
    writeFileSync(join(dir, "trial"), "v2 0\n");
    for (const n of [1, 2, 3]) {
      expect((await launch()).code).toBe(1);
      expect(read("trial")).toBe(`v2 ${n}`);
    }
    const { code, stderr } = await launch();
    expect(code).toBe(0);
    expect(stderr).toContain("rolled back from v2 to v1: crashed at start 3 times");
    expect(runs().at(-1)).toBe("v1 agent --config c.yaml trial=");
    expect(readlinkSync(join(dir, "current"))).toBe("versions/v1");
    expect(read("rolled-back")).toBe("from=v2 to=v1 reason=crashed at start 3 times");
    expect(existsSync(join(dir, "trial"))).toBe(false);
  });

  test("a version not healthy within the limit is killed and the previous one runs", async () => {
    version("v1", "exit 0");
    version("v2", `echo $$ > '${join(root, "v2.pid")}'\nexec sleep 600`);
    link("previous", "v1");
    link("current", "v2");
    writeFileSync(join(dir, "trial"), "v2 0\n");
    const { code, stderr } = await launch(1);
    expect(code).toBe(0);
    expect(stderr).toContain("rolled back from v2 to v1: not healthy within 1s");
    expect(runs()).toEqual([
      "v2 agent --config c.yaml trial=v2",
      "v1 agent --config c.yaml trial=",
    ]);
    const pid = Number(readFileSync(join(root, "v2.pid"), "utf8"));
    expect(() => process.kill(pid, 0)).toThrow();
    expect(read("rolled-back")).toBe("from=v2 to=v1 reason=not healthy within 1s");
  });

  test("a trial the swap never finished opening (it names another version) is dropped", async () => {
    version("v2", "exit 0");
    link("current", "v2");
    writeFileSync(join(dir, "trial"), "v3 0\n");
    expect((await launch()).code).toBe(0);
    expect(runs()).toEqual(["v2 agent --config c.yaml trial="]);
    expect(existsSync(join(dir, "trial"))).toBe(false);
  });

  test("with no previous version a failed trial falls back to the packaged executable", async () => {
    version("v2", "exit 1");
    link("current", "v2");
    writeFileSync(join(dir, "trial"), "v2 3\n");
    expect((await launch()).code).toBe(0);
    expect(runs()).toEqual(["packaged agent --config c.yaml trial="]);
    expect(existsSync(join(dir, "current"))).toBe(false);
    expect(read("rolled-back")).toBe("from=v2 to=packaged reason=crashed at start 3 times");
  });

  test("a stop during a trial reaches the agent on trial", async () => {
    version("v1", "exit 0");
    version("v2", `trap 'echo stopped >> '"'${ran}'"'; exit 0' TERM\nwhile :; do sleep 0.1; done`);
    link("previous", "v1");
    link("current", "v2");
    writeFileSync(join(dir, "trial"), "v2 0\n");
    const p = Bun.spawn(
      [
        "/bin/sh",
        LAUNCHER,
        "--root-dir",
        root,
        "--packaged",
        join(root, "packaged"),
        "--",
        "agent",
      ],
      { stdout: "ignore", stderr: "pipe" },
    );
    for (let i = 0; i < 100 && runs().length === 0; i++) await Bun.sleep(50);
    p.kill("SIGTERM");
    expect(await p.exited).toBe(0);
    expect(runs()).toEqual(["v2 agent trial=v2", "stopped"]);
    // The stop was not a crashed start: the trial has as many starts as before it.
    expect(read("trial")).toBe("v2 0");
  });

  test("stops during a trial do not use up its starts; crashes do", async () => {
    version("v1", "exit 0");
    version(
      "v2",
      `trap 'exit 0' TERM
while :; do sleep 0.1; done`,
    );
    link("previous", "v1");
    link("current", "v2");
    writeFileSync(join(dir, "trial"), "v2 2\n");
    for (let stop = 0; stop < 3; stop++) {
      const before = runs().length;
      const p = Bun.spawn(
        [
          "/bin/sh",
          LAUNCHER,
          "--root-dir",
          root,
          "--packaged",
          join(root, "packaged"),
          "--",
          "agent",
        ],
        { stdout: "ignore", stderr: "ignore" },
      );
      for (let i = 0; i < 100 && runs().length === before; i++) await Bun.sleep(50);
      p.kill("SIGTERM");
      await p.exited;
      expect(read("trial")).toBe("v2 2");
    }
    // A crash is counted: the third start crashes, and the fourth puts v1 back.
    writeFileSync(join(dir, "versions", "v2", "fleetlet"), agentScript("v2", "exit 1"), {
      mode: 0o755,
    });
    expect((await launch()).code).toBe(1);
    expect(read("trial")).toBe("v2 3");
    await launch();
    expect(readlinkSync(join(dir, "current"))).toBe("versions/v1");
    expect(read("rolled-back")).toBe("from=v2 to=v1 reason=crashed at start 3 times");
  });
});
