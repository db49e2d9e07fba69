// Stops and removes every pod sandbox (and so every container) of a CRI runtime, so that CNI
// releases addresses and network namespaces. Used by `scripts/testbed stop` on the test bed's
// private containerd only.
//   bun scripts/lib/cri-cleanup.ts unix:///path/to/containerd.sock
import { createCriClient } from "../../src/cri/index.ts";

const endpoint = process.argv[2];
if (endpoint === undefined) {
  console.error("usage: cri-cleanup.ts unix:///path/to/socket");
  process.exit(2);
}
const cri = createCriClient({ endpoint, defaultTimeoutMs: 10_000 });
try {
  const { items } = await cri.listPodSandbox({});
  await Promise.all(
    items.map(async (sb) => {
      try {
        await cri.stopPodSandbox({ podSandboxId: sb.id });
        await cri.removePodSandbox({ podSandboxId: sb.id });
      } catch (err) {
        console.error(`cri-cleanup: sandbox ${sb.id}: ${(err as Error).message}`);
      }
    }),
  );
  console.error(`cri-cleanup: removed ${items.length} pod sandbox(es)`);
} finally {
  cri.close();
}
