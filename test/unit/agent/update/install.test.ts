// The agent's side of an update on the device: a verified executable installed as a version with
// its trial opened, in the layout the launcher (deploy/fleetlet-launch) reads; the trial's
// health written once the agent is ready; the launcher's rollback record read once. No root.
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import {
  existsSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  installVersion,
  linkedVersion,
  updateDir,
  versionName,
} from "../../../../src/agent/update/install.ts";
import { runTrialWatch, takeRollback } from "../../../../src/agent/update/trial.ts";
import { FakeClock } from "../../../../src/util/clock.ts";
import { nullLogger } from "../../../../src/util/log.ts";

const LAUNCHER = join(import.meta.dir, "../../../../deploy/fleetlet-launch");
const SHA = "3f1c0a9be2d74c5e8f6a7b8c9d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f7a8b9c0";
let root: string;
let dir: string;

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), "fleetlet-update-"));
  dir = updateDir(root);
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

/** A verified executable as the download leaves it, next to the versions. */
function downloaded(body: string): string {
  const file = join(root, `dl-${Math.random().toString(36).slice(2)}`);
  writeFileSync(file, `#!/bin/sh\n${body}\n`, { mode: 0o600 });
  return file;
}

describe("installing a version (no root)", () => {
  test("a version's folder name is its version and the sha256's first 12 digits; bad ones are refused", () => {
    expect(versionName("0.2.0", SHA)).toBe("0.2.0-3f1c0a9be2d7");
    expect(() => versionName("../x", SHA)).toThrow('release invalid version "../x"');
    expect(() => versionName("1.0", "abc")).toThrow("is not 64 hex digits");
  });

  test("the first version: executable in place, trial opened, current names it, no previous", () => {
    installVersion(dir, "v1", downloaded("exit 0"));
    expect(statSync(join(dir, "versions/v1/fleetlet")).mode & 0o777).toBe(0o755);
    expect(readFileSync(join(dir, "trial"), "utf8")).toBe("v1 0\n");
    expect(readlinkSync(join(dir, "current"))).toBe("versions/v1");
    expect(linkedVersion(dir, "previous")).toBeUndefined();
  });

  test("the next version: previous names the one that was current", () => {
    installVersion(dir, "v1", downloaded("exit 0"));
    installVersion(dir, "v2", downloaded("exit 0"));
    expect(linkedVersion(dir, "previous")).toBe("v1");
    expect(linkedVersion(dir, "current")).toBe("v2");
    expect(readFileSync(join(dir, "trial"), "utf8")).toBe("v2 0\n");
    expect(existsSync(join(dir, "current.tmp"))).toBe(false);
  });

  test("the launcher runs what was installed on trial, and a version that crashes goes back to the one before", async () => {
    installVersion(dir, "v1", downloaded(`echo v1 >> '${root}/ran'`));
    rmSync(join(dir, "trial"));
    installVersion(dir, "v2", downloaded(`echo "v2 $FLEETLET_TRIAL" >> '${root}/ran'; exit 1`));
    const launch = async () =>
      Bun.spawn(["/bin/sh", LAUNCHER, "--root-dir", root, "--", "agent"], {
        stdout: "ignore",
        stderr: "ignore",
      }).exited;
    for (let i = 0; i < 4; i++) await launch();
    expect(readFileSync(join(root, "ran"), "utf8")).toBe("v2 v2\nv2 v2\nv2 v2\nv1\n");
    expect(linkedVersion(dir, "current")).toBe("v1");
    expect(takeRollback(dir)).toEqual({ from: "v2", to: "v1", reason: "crashed at start 3 times" });
    expect(takeRollback(dir)).toBeUndefined();
  });
});

describe("an agent on trial (no root)", () => {
  test("writes healthy with its version once ready, and not before", async () => {
    const clock = new FakeClock();
    let ready = false;
    let asked = 0;
    const done = runTrialWatch(
      {
        trial: "v2",
        dir: root,
        clock,
        logger: nullLogger,
        ready: () => {
          asked++;
          return ready;
        },
      },
      new AbortController().signal,
    );
    await Bun.sleep(0);
    expect(asked).toBe(1);
    expect(existsSync(join(root, "healthy"))).toBe(false);
    ready = true;
    clock.step(1000);
    await done;
    expect(asked).toBe(2);
    expect(readFileSync(join(root, "healthy"), "utf8")).toBe("v2\n");
  });

  test("an agent not on trial writes nothing", async () => {
    await runTrialWatch(
      {
        trial: undefined,
        dir: root,
        clock: new FakeClock(),
        logger: nullLogger,
        ready: () => true,
      },
      new AbortController().signal,
    );
    expect(existsSync(join(root, "healthy"))).toBe(false);
  });
});
