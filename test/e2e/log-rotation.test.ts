// Container log rotation end to end: a container writing about 1 MB/s of numbered lines, rotated
// by the compiled agent at 1 MiB with 3 files kept, and `fleetlet logs -f` following it from
// before the first rotation to the end. Needs root and the test bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Pod } from "../../src/api/types.ts";
import { TestAgent } from "../lib/agent.ts";
import { shellPodManifest } from "../lib/manifests.ts";
import { eventually, fleetletBin } from "../lib/testbed.ts";

const LINES = 40_000;
const agent = new TestAgent({
  args: [
    "--container-log-max-size",
    "1Mi",
    "--container-log-max-files",
    "3",
    "--container-log-monitor-interval",
    "200ms",
  ],
});

// "ready", then (once /tmp/go exists) LINES numbered lines of ~100 bytes in batches of 100 with a
// 10 ms pause between batches (~1 MB/s with the CRI prefix), then "done".
const script = `echo ready
while [ ! -f /tmp/go ]; do usleep 20000; done
pad=$(printf '%080d' 0)
i=0
while [ $i -lt ${LINES} ]; do
  j=0
  while [ $j -lt 100 ]; do i=$((i+1)); j=$((j+1)); echo "line $i $pad"; done
  usleep 10000
done
echo done
exec sleep 3600`;

const manifest = shellPodManifest("writer", agent.tb.busybox, script);

beforeAll(() => agent.start(), 30_000);
afterAll(() => agent.cleanup(), 60_000);

describe("container log rotation (needs root and the test bed)", () => {
  let pod: Pod;
  const logDir = () => join(agent.logsDir, `default_${pod.metadata.name}_${pod.metadata.uid}`, "c");

  test("rotates at 1 MiB, gzips older files, never keeps more than 3, and logs -f shows every line once", async () => {
    agent.writeManifest("writer.yaml", manifest);
    pod = await agent.waitPod("writer", "Running", (p) => p.status?.phase === "Running");
    const name = pod.metadata.name;
    const follower = Bun.spawn([fleetletBin, "logs", name, "-f", "--socket", agent.socket], {
      stdout: "pipe",
      stderr: "pipe",
    });
    let out = "";
    const reading = (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of follower.stdout) out += decoder.decode(chunk);
    })();
    try {
      await eventually("logs -f to print the first line", () => out.startsWith("ready\n"));
      const go = agent.cli(["exec", name, "--", "touch", "/tmp/go"]);
      expect(go.code).toBe(0);
      let most = 0;
      const gzipped = new Set<string>();
      const rotated = new Set<string>();
      await eventually(
        "the writer's last line through logs -f",
        () => {
          const files = readdirSync(logDir());
          most = Math.max(most, files.length);
          for (const f of files) {
            if (f.endsWith(".gz")) gzipped.add(f);
            else if (f !== "0.log" && !f.endsWith(".tmp")) rotated.add(f);
          }
          return out.includes("\ndone\n");
        },
        60_000,
        50,
      );
      expect(most).toBeLessThanOrEqual(3);
      expect(rotated.size).toBeGreaterThanOrEqual(3);
      expect(gzipped.size).toBeGreaterThanOrEqual(2);
      for (const f of [...rotated, ...gzipped]) expect(f).toMatch(/^0\.log\.\d{8}-\d{6}(\.gz)?$/);
      const files = readdirSync(logDir()).sort();
      expect(files.length).toBeLessThanOrEqual(3);
      const gz = files.find((f) => f.endsWith(".gz"));
      if (gz !== undefined) {
        const text = new TextDecoder().decode(Bun.gunzipSync(readFileSync(join(logDir(), gz))));
        expect(text).toMatch(/^\S+ stdout F line \d+ 0+\n/);
      }
    } finally {
      follower.kill();
      await follower.exited;
      await reading;
    }
    const lines = out.split("\n");
    expect(lines[0]).toBe("ready");
    const numbers = lines.filter((l) => l.startsWith("line ")).map((l) => Number(l.split(" ")[1]));
    expect(numbers.length).toBe(LINES);
    const wrong = numbers.findIndex((n, i) => n !== i + 1);
    expect(wrong).toBe(-1);
    expect(lines.at(-2)).toBe("done");
  }, 120_000);

  test("logs --tail answers after rotations", () => {
    const r = agent.cli(["logs", pod.metadata.name, "--tail", "2"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^line ${LINES} 0{80}\\ndone\\n$`));
  });

  test("the pod's log folder goes, rotated files and all, when the pod is deleted", async () => {
    const dir = join(agent.logsDir, `default_${pod.metadata.name}_${pod.metadata.uid}`);
    expect(existsSync(dir)).toBe(true);
    agent.removeManifest("writer.yaml");
    await eventually("the log folder to be removed", () => !existsSync(dir), 30_000);
  }, 60_000);
});
