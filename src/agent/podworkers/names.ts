// Which UID of a static pod's full name (namespace/name) may run: a new UID of a name whose old
// UID is still terminating waits (blocked), and starts when the old one is terminated.
import type { Worker } from "./worker.ts";

export class StartedNames {
  /** full name → the UID allowed to run for it. */
  private readonly owners = new Map<string, string>();

  constructor(private readonly workers: ReadonlyMap<string, Worker>) {}

  /** Whether `w` may start now; if so it owns its name from now on. */
  mayStart(w: Worker): boolean {
    const owner = this.owners.get(w.fullName);
    const other = owner === undefined ? undefined : this.workers.get(owner);
    if (
      owner === undefined ||
      owner === w.uid ||
      other === undefined ||
      other.state === "terminated"
    ) {
      this.owners.set(w.fullName, w.uid);
      return true;
    }
    return false;
  }

  /** After the owner of `fullName` terminated: the first worker waiting for the name, now
   * unblocked (the caller schedules it), if any. */
  release(fullName: string): Worker | undefined {
    const owner = this.owners.get(fullName);
    if (owner !== undefined) {
      const w = this.workers.get(owner);
      if (w !== undefined && w.state !== "terminated") return undefined;
      this.owners.delete(fullName);
    }
    for (const w of this.workers.values()) {
      if (w.fullName === fullName && w.blocked) {
        w.blocked = false;
        return w;
      }
    }
    return undefined;
  }

  /** Forgets the name's owner if it is `uid` (its worker is dropped). */
  forget(fullName: string, uid: string): void {
    if (this.owners.get(fullName) === uid) this.owners.delete(fullName);
  }
}
