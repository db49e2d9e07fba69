// The runtime's image filesystem: where it keeps images, as its ImageFsInfo names it. The
// eviction manager watches its space (imagefs.available) and device health reports it.
import type { CriRuntime } from "../../cri/index.ts";

/** The image filesystem's mountpoint; rejects when the runtime names none or does not answer
 * within 10 s. */
export async function imageFsMountpoint(cri: Pick<CriRuntime, "imageFsInfo">): Promise<string> {
  const info = await cri.imageFsInfo({}, { timeoutMs: 10_000 });
  const path = info.imageFilesystems[0]?.fsId?.mountpoint;
  if (!path) throw new Error("the runtime's ImageFsInfo names no image filesystem");
  return path;
}
