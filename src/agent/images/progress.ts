// How far a running pull has got, read from the runtime's content store (the ingests: blobs
// being written), and whether it has stalled. containerd names a pull's ingests after the blob
// only ("layer-sha256:<hex>", "manifest-sha256:<hex>"), not after the image, so a pull counts as
// its own every ingest that appears or moves while it runs. With serialized pulls (the default)
// that is exactly its blobs; with pulls in parallel, a pull's figures include the blobs of the
// others that move meanwhile.
//
// Invariants:
// - An ingest listed, unmoved, since before the pull began is not the pull's (a leftover) until
//   it moves; then what it already had counts as done.
// - The pull waits for bytes while no ingest of its own has been seen yet (it resolves the
//   image) or while one of its ingests is listed incomplete; only then can it stall. Once its
//   ingests are all written it unpacks, which writes none, and the stall clock does not run.
// - An ingest of the pull that is no longer listed was written in full (a failed write fails
//   the pull, and then the figures no longer matter).
// - Figures only grow: containerd's offsets move in steps (1 MiB in 1.6), never back.

import type { IngestStatus } from "../../cri/containerd.ts";

/** What the pull has written, over the blobs it has begun. */
export interface PullFigures {
  /** Bytes written. */
  done: number;
  /** Bytes of the blobs begun (0 while none is known); grows as further blobs begin. */
  total: number;
}

export interface ProgressState {
  /** Offsets of the ingests listed when the pull began, by ref (not the pull's while unmoved). */
  readonly leftovers: ReadonlyMap<string, number>;
  /** The pull's ingests by ref: last offset seen (the total once no longer listed) and total. */
  readonly mine: ReadonlyMap<string, { offset: number; total: number }>;
  /** Whether the pull waits for bytes (see the invariants). */
  readonly waiting: boolean;
  /** When the figures last moved, or the pull last stopped waiting (monotonic ms). */
  readonly movedAt: number;
}

/** The state of a pull that begins at `now` with `ingests` listed. */
export function beginProgress(ingests: readonly IngestStatus[], now: number): ProgressState {
  return {
    leftovers: new Map(ingests.map((i) => [i.ref, i.offset])),
    mine: new Map(),
    waiting: true,
    movedAt: now,
  };
}

/** The state after a listing read at `now`. */
export function observeIngests(
  state: ProgressState,
  ingests: readonly IngestStatus[],
  now: number,
): ProgressState {
  const mine = new Map(state.mine);
  const listed = new Set<string>();
  let moved = false;
  for (const i of ingests) {
    listed.add(i.ref);
    const known = mine.get(i.ref);
    if (known === undefined && state.leftovers.get(i.ref) === i.offset) continue;
    if (known === undefined || i.offset > known.offset || i.total !== known.total) moved = true;
    mine.set(i.ref, { offset: Math.max(i.offset, known?.offset ?? 0), total: i.total });
  }
  let incomplete = false;
  for (const [ref, seen] of mine) {
    if (listed.has(ref)) {
      incomplete ||= seen.total === 0 || seen.offset < seen.total;
    } else if (seen.offset < seen.total) {
      mine.set(ref, { offset: seen.total, total: seen.total });
      moved = true;
    }
  }
  const waiting = mine.size === 0 || incomplete;
  return {
    leftovers: state.leftovers,
    mine,
    waiting,
    movedAt: moved || !waiting ? now : state.movedAt,
  };
}

export function figuresOf(state: ProgressState): PullFigures {
  let done = 0;
  let total = 0;
  for (const seen of state.mine.values()) {
    done += seen.offset;
    total += seen.total;
  }
  return { done, total };
}

/** How long the pull has waited for bytes that did not come (ms); 0 while it does not wait. */
export function stalledFor(state: ProgressState, now: number): number {
  return state.waiting ? Math.max(0, now - state.movedAt) : 0;
}

/** "12.3 MiB" (binary units, one decimal above bytes). */
export function formatBytes(bytes: number): string {
  const units = ["KiB", "MiB", "GiB", "TiB"];
  if (bytes < 1024) return `${bytes} B`;
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}

/** "12.3 MiB of 45.6 MiB" ("12.3 MiB" while no total is known). */
export function figuresText(figures: PullFigures): string {
  const done = formatBytes(figures.done);
  return figures.total > 0 ? `${done} of ${formatBytes(figures.total)}` : done;
}

/** The waiting message of a container whose image is being pulled:
 * `Pulling image "x": 12.3 MiB of 45.6 MiB`. */
export function progressMessage(image: string, figures: PullFigures): string {
  return `Pulling image ${JSON.stringify(image)}: ${figuresText(figures)}`;
}
