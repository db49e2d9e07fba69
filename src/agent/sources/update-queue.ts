// A FIFO of pod updates with one consumer (the sync loop). Unbounded: config updates must never
// be dropped, and there are only as many as there are pod changes.

import type { PodUpdate } from "./pod-config.ts";

export class PodUpdateQueue {
  private items: PodUpdate[] = [];
  private waiter: (() => void) | undefined;

  /** Updates waiting. */
  get size(): number {
    return this.items.length;
  }

  push(update: PodUpdate): void {
    this.items.push(update);
    this.waiter?.();
  }

  /** The oldest waiting update, if any, without waiting. */
  tryNext(): PodUpdate | undefined {
    return this.items.shift();
  }

  /** The oldest update, waiting for one; rejects with the signal's reason when aborted. */
  async next(signal?: AbortSignal): Promise<PodUpdate> {
    for (;;) {
      const item = this.items.shift();
      if (item !== undefined) return item;
      await this.whenPushed(signal);
    }
  }

  private whenPushed(signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const onAbort = () => {
        this.waiter = undefined;
        reject(signal?.reason);
      };
      this.waiter = () => {
        this.waiter = undefined;
        signal?.removeEventListener("abort", onAbort);
        resolve();
      };
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }
}
