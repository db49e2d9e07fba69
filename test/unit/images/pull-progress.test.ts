import { describe, expect, test } from "bun:test";
import {
  beginProgress,
  figuresOf,
  formatBytes,
  observeIngests,
  type ProgressState,
  progressMessage,
  stalledFor,
} from "../../../src/agent/images/progress.ts";
import type { IngestStatus } from "../../../src/cri/containerd.ts";

const MiB = 1024 * 1024;
const ingest = (ref: string, offset: number, total: number): IngestStatus => ({
  ref,
  offset,
  total,
  expected: "",
});

/** Listings read one second apart, from a pull begun at 0 with `before` listed. */
function replay(before: IngestStatus[], listings: IngestStatus[][]): ProgressState {
  let state = beginProgress(before, 0);
  listings.forEach((ingests, i) => {
    state = observeIngests(state, ingests, (i + 1) * 1000);
  });
  return state;
}

describe("a pull's figures from the runtime's ingests", () => {
  const table: [string, IngestStatus[], IngestStatus[][], { done: number; total: number }][] = [
    ["nothing listed yet: nothing known", [], [[]], { done: 0, total: 0 }],
    [
      "sums the offsets and totals of the blobs being written",
      [],
      [
        [
          ingest("layer-sha256:a", 1 * MiB, 1 * MiB + 5),
          ingest("layer-sha256:b", 2 * MiB, 24 * MiB),
        ],
      ],
      { done: 3 * MiB, total: 25 * MiB + 5 },
    ],
    [
      "a blob no longer listed counts as written in full",
      [],
      [
        [ingest("layer-sha256:a", 0, 1000), ingest("layer-sha256:b", MiB, 24 * MiB)],
        [ingest("layer-sha256:b", 2 * MiB, 24 * MiB)],
      ],
      { done: 2 * MiB + 1000, total: 24 * MiB + 1000 },
    ],
    [
      "an ingest listed unmoved since before the pull is not the pull's",
      [ingest("layer-sha256:old", 5 * MiB, 9 * MiB)],
      [[ingest("layer-sha256:old", 5 * MiB, 9 * MiB), ingest("layer-sha256:b", MiB, 2 * MiB)]],
      { done: MiB, total: 2 * MiB },
    ],
    [
      "a leftover that moves is the pull's, with what it already had (a resumed download)",
      [ingest("layer-sha256:old", 5 * MiB, 9 * MiB)],
      [[ingest("layer-sha256:old", 6 * MiB, 9 * MiB)]],
      { done: 6 * MiB, total: 9 * MiB },
    ],
    [
      "figures never go back",
      [],
      [[ingest("layer-sha256:a", 3 * MiB, 9 * MiB)], [ingest("layer-sha256:a", 2 * MiB, 9 * MiB)]],
      { done: 3 * MiB, total: 9 * MiB },
    ],
  ];
  for (const [what, before, listings, figures] of table) {
    test(what, () => {
      expect(figuresOf(replay(before, listings))).toEqual(figures);
    });
  }
});

describe("when a pull has stalled", () => {
  test("it waits for bytes from its start while no ingest of its own has appeared", () => {
    const state = replay([], [[], [], []]);
    expect(stalledFor(state, 3000)).toBe(3000);
  });

  test("the clock starts again each time an offset moves or an ingest appears", () => {
    const a = (offset: number) => ingest("layer-sha256:a", offset, 9 * MiB);
    const state = replay([], [[], [a(0)], [a(0)], [a(MiB)], [a(MiB)], [a(MiB)]]);
    expect(stalledFor(state, 6000)).toBe(2000);
  });

  test("a leftover that does not move does not keep it from stalling", () => {
    const old = ingest("layer-sha256:old", MiB, 9 * MiB);
    expect(stalledFor(replay([old], [[old], [old]]), 2000)).toBe(2000);
  });

  test("once all its blobs are written (it unpacks) it does not wait, however long that takes", () => {
    const a = ingest("layer-sha256:a", MiB, 9 * MiB);
    const state = replay([], [[a], [], [], []]);
    expect(stalledFor(state, 4000)).toBe(0);
    expect(stalledFor(state, 60_000)).toBe(0);
  });

  test("a blob with no total yet is waited for", () => {
    const state = replay(
      [],
      [[ingest("manifest-sha256:m", 0, 0)], [ingest("manifest-sha256:m", 0, 0)]],
    );
    expect(stalledFor(state, 5000)).toBe(4000);
  });
});

describe("the progress message", () => {
  const table: [number, string][] = [
    [0, "0 B"],
    [1023, "1023 B"],
    [1536, "1.5 KiB"],
    [12.34 * MiB, "12.3 MiB"],
    [3 * 1024 * MiB, "3.0 GiB"],
  ];
  for (const [bytes, text] of table) {
    test(`formatBytes(${bytes}) is ${JSON.stringify(text)}`, () => {
      expect(formatBytes(bytes)).toBe(text);
    });
  }

  test("says the image, the bytes written and the bytes of the blobs begun", () => {
    expect(progressMessage("busybox", { done: 12.34 * MiB, total: 45.6 * MiB })).toBe(
      'Pulling image "busybox": 12.3 MiB of 45.6 MiB',
    );
    expect(progressMessage("busybox", { done: 0, total: 0 })).toBe('Pulling image "busybox": 0 B');
  });
});
