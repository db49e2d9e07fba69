// What reading the device's health costs the agent: CPU time per reading (user + system, over
// many readings of this machine's real /proc and /sys) and the resident memory the collector adds
// once loaded and warmed up (zod and the protocol's schemas, which every agent already loads, are
// loaded before the first figure). Run: bun scripts/bench/device-health.ts [readings]
import "../../src/protocol/index.ts";

const readings = Number(process.argv[2] ?? 500);
Bun.gc(true);
const rssBefore = process.memoryUsage().rss;
const { collectHealth, hostCollectorDeps } = await import("../../src/agent/health/collect.ts");
const { significant } = await import("../../src/agent/health/reporter.ts");
const deps = hostCollectorDeps(["/var/lib"]);
for (let i = 0; i < 20; i++) significant(collectHealth(deps, Date.now()));
const start = process.cpuUsage();
let last = collectHealth(deps, Date.now());
for (let i = 0; i < readings; i++) {
  last = collectHealth(deps, Date.now());
  significant(last);
}
const used = process.cpuUsage(start);
Bun.gc(true);
const rssAfter = process.memoryUsage().rss;
const bytes = JSON.stringify({ type: "health", health: last }).length;
console.log(
  JSON.stringify({
    readings,
    cpuMsPerReading: Number(((used.user + used.system) / 1000 / readings).toFixed(3)),
    rssAddedMiB: Number(((rssAfter - rssBefore) / 2 ** 20).toFixed(2)),
    messageBytes: bytes,
    facts: {
      temperatures: last.temperatures.length,
      filesystems: last.filesystems.length,
      interfaces: last.interfaces.length,
    },
  }),
);
