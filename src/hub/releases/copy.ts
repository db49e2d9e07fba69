// Copies every agent release of one store into another (`fleetlet hub migrate`: a single hub's
// folder into PostgreSQL): each pushed again, its executable inflated from the stored gzip as it
// is read, so the target checks it against its manifest as it checks any push. A release the
// target already holds with the same bytes is left as it is, so a copy may be run again.
import type { Releases } from "./store.ts";

/** Copies every release of `from` into `to`; gives how many `to` did not hold. */
export async function copyReleases(from: Releases, to: Releases): Promise<number> {
  let stored = 0;
  for (const info of await from.list()) {
    const r = await from.get(info.version, info.arch);
    if (r === undefined) continue;
    const gz = from.read(r, 0, r.compressedSize - 1);
    const stream = gz instanceof Blob ? gz.stream() : gz;
    const gunzip = new DecompressionStream("gzip") as unknown as ReadableWritablePair<
      Uint8Array,
      Uint8Array
    >;
    const exe = new Response(stream.pipeThrough(gunzip));
    if ((await to.push(r.version, r.arch, r.manifest, exe)).stored) stored++;
  }
  return stored;
}
