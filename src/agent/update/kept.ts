// What an earlier try at a release left on the disk (docs/agent-updates.md, "The agent's part"):
// a power cut after the download, or during the install, leaves the verified executable in
// `download/<sha256>.bin` or in its version's folder. The next try uses it again once its size
// and sha256 match the manifest, instead of fetching the release again. The files abandoned
// releases left in `download/` (a part, a download not installed) are removed before a new one
// is fetched, so that a device never holds more than one release's download.
import { createReadStream } from "node:fs";
import { readdir, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import type { ReleaseFields } from "../../release/manifest.ts";
import { fsyncFolder } from "../../util/atomic-file.ts";

type Wanted = Pick<ReleaseFields, "size" | "sha256">;

/** Whether `path` is a file of the manifest's size and sha256 (absent or unreadable: false). */
export async function holdsRelease(path: string, want: Wanted): Promise<boolean> {
  try {
    const st = await stat(path);
    if (!st.isFile() || st.size !== want.size) return false;
    const hash = new Bun.CryptoHasher("sha256");
    for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
    return hash.digest("hex") === want.sha256;
  } catch {
    return false;
  }
}

/** Removes, durably, what `downloadDir` holds of releases other than `sha256`. */
export async function dropOtherDownloads(downloadDir: string, sha256: string): Promise<void> {
  let names: string[];
  try {
    names = await readdir(downloadDir);
  } catch {
    return;
  }
  const others = names.filter((n) => !n.startsWith(`${sha256}.`));
  if (others.length === 0) return;
  await Promise.all(others.map((n) => rm(join(downloadDir, n), { force: true, recursive: true })));
  fsyncFolder(downloadDir);
}
