// The chaos soak's command line (scripts/soak runs it as root with the test bed up):
//   bun scripts/lib/soak.ts [--minutes N] [--seed N]
// Prints each step, each quiet period's outcome, and a report; exits 1 on a violation.
import { parseArgs } from "node:util";
import { runSoak } from "../../test/lib/soak/run.ts";

const { values } = parseArgs({
  options: { minutes: { type: "string", default: "60" }, seed: { type: "string" } },
});
const seed = values.seed !== undefined ? Number(values.seed) : Math.floor(Math.random() * 2 ** 31);
const minutes = Number(values.minutes);
if (!Number.isInteger(seed) || !(minutes > 0)) {
  console.error("usage: scripts/soak [--minutes N] [--seed N]");
  process.exit(2);
}
const t0 = Date.now();
const report = await runSoak({
  seed,
  durationMs: minutes * 60_000,
  limitMs: (minutes + 15) * 60_000,
  stepsPerRound: 12,
  settleMs: 120_000,
  maxFiles: 8,
  bounds: { rssBytes: 200 * 1024 * 1024, openFiles: 400 },
  log: (line) => console.log(`[${((Date.now() - t0) / 1000).toFixed(0).padStart(5)} s] ${line}`),
});
const sum = (t: Record<string, number>) => Object.values(t).reduce((a, b) => a + b, 0);
const table = (t: Record<string, number>) =>
  Object.entries(t)
    .map(([k, v]) => `${k} ${v}`)
    .join(", ");
console.log(`
soak report (seed ${report.seed}, ${(report.elapsedMs / 60_000).toFixed(1)} min)
  rounds            ${report.rounds}
  operations        ${sum(report.operations)} (${table(report.operations)})
  faults            ${sum(report.faults)} (${table(report.faults)})
  checks            ${report.checks}
  excused restarts  ${report.excused} (starts cut by an agent or containerd kill)
  violations        ${report.violations.length}
  agent max RSS     ${(report.maxRssBytes / 1048576).toFixed(1)} MiB
  agent max fds     ${report.maxOpenFiles}
  drops reported    ${report.eventsDroppedReported} events (EventsDropped at the hub)`);
for (const v of report.violations)
  console.log(
    `  violation: seed ${v.seed} round ${v.round} after "${v.lastStep}": ${v.differences.join("; ")}`,
  );
process.exit(report.violations.length === 0 ? 0 : 1);
