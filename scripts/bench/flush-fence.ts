// The cost of node_sessions' fence in a hub replica's flush (src/hub/pg/node-sessions.ts): a
// flush of --nodes nodes' progress and one pod each, on a throwaway PostgreSQL cluster
// (scripts/lib/postgres.ts), on two databases in turn: one where no node was taken (the fence
// reads no row) and one where the flushing store took every node (the fence locks every node's
// row FOR SHARE); prints the median of each over --rounds and the mean time of one claim.
// Needs root and Debian's postgresql.
//   node_modules/.bin/bun scripts/bench/flush-fence.ts [--nodes 5000] [--rounds 6]
import { loadavg } from "node:os";
import { parseArgs } from "node:util";
import type { Pod } from "../../src/api/types.ts";
import type { NodeProgress } from "../../src/hub/store.ts";
import { PostgresHubStore } from "../../src/hub/store-postgres.ts";
import { PostgresCluster } from "../lib/postgres.ts";

const { values } = parseArgs({
  options: { nodes: { type: "string", default: "5000" }, rounds: { type: "string", default: "6" } },
});
const N = Number(values.nodes);
const ROUNDS = Number(values.rounds);

const progress = (name: string, ackedSeq: number): NodeProgress => ({
  ...{ name, credentialHash: `c-${name}`, hubLabels: {}, joinedAt: 1, ackedSeq },
  ...{ connected: true, desiredGeneration: 0, ackedGeneration: 0, streamId: "s" },
});
const pod = (uid: string): Pod => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: `web-${uid}`, namespace: "default", uid },
  spec: { containers: [{ name: "web", image: "busybox" }] },
  status: { phase: "Running" },
});

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

/** One flush of every node's progress (seq `seq`) and pod; its time in ms. */
async function flushOnce(s: PostgresHubStore, seq: number): Promise<number> {
  for (let i = 0; i < N; i++) {
    s.queueProgress(progress(`n${i}`, seq));
    s.queuePod(`n${i}`, `u${i}`, pod(`u${i}`));
  }
  const t = performance.now();
  await s.flush();
  return performance.now() - t;
}

/** A store on a database of its own holding every node. */
async function storeOf(cluster: PostgresCluster): Promise<PostgresHubStore> {
  const s = await PostgresHubStore.open(await cluster.createDatabase());
  for (let i = 0; i < N; i++) s.queueProgress(progress(`n${i}`, 0));
  await s.flush();
  return s;
}

const cluster = await PostgresCluster.start();
try {
  // Two databases, the rounds alternating between them, so that the machine's load and the
  // tables' growth weigh on both alike.
  const [untakenStore, takenStore] = [await storeOf(cluster), await storeOf(cluster)];
  const t0 = performance.now();
  for (let i = 0; i < N; i++) await takenStore.claim(`n${i}`, "bench");
  const claimMs = (performance.now() - t0) / N;
  const untaken: number[] = [];
  const taken: number[] = [];
  for (let r = 1; r <= ROUNDS; r++) {
    untaken.push(await flushOnce(untakenStore, r));
    taken.push(await flushOnce(takenStore, r));
  }
  console.log(
    `flush of ${N} nodes (progress and a pod each), median of ${ROUNDS}: no node taken ${median(untaken).toFixed(0)} ms, every node taken (fenced) ${median(taken).toFixed(0)} ms; one claim ${claimMs.toFixed(2)} ms; load average ${loadavg()[0]?.toFixed(1)}`,
  );
  await untakenStore.close();
  await takenStore.close();
} finally {
  await cluster.remove();
}
