import { describe, expect, test } from "bun:test";
import {
  type FolderFile,
  ImportFolder,
  isArchiveName,
} from "../../../src/agent/images/import/folder.ts";
import { CriError, GrpcStatus } from "../../../src/cri/errors.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { createLogger } from "../../../src/util/log.ts";

interface Harness {
  folder: ImportFolder;
  clock: FakeClock;
  files: FolderFile[];
  imports: string[];
  events: string[];
  /** What importing a file does: its names, or an error to throw. */
  outcome: Map<string, string[] | Error>;
  /** Set: listing the folder fails with it. */
  listError?: Error;
}

function harness(): Harness {
  const clock = new FakeClock();
  const h: Harness = {
    clock,
    files: [],
    imports: [],
    events: [],
    outcome: new Map(),
    folder: undefined as unknown as ImportFolder,
  };
  h.folder = new ImportFolder({
    path: "/imports",
    clock,
    logger: createLogger({ level: "error", write: () => {} }),
    periodMs: 5000,
    settleMs: 2000,
    list: async () => {
      if (h.listError !== undefined) throw h.listError;
      return h.files.map((f) => ({ ...f }));
    },
    importArchive: async (file) => {
      h.imports.push(file);
      const out = h.outcome.get(file.slice("/imports/".length)) ?? [];
      if (out instanceof Error) throw out;
      return out;
    },
    transient: (err) => err instanceof CriError && err.code === "Unavailable",
    nodeEvent: (type, reason, message) => h.events.push(`${type} ${reason}: ${message}`),
  });
  return h;
}

const signal = new AbortController().signal;

function put(h: Harness, name: string, size = 10, ageMs = 10_000): void {
  h.files = h.files.filter((f) => f.name !== name);
  h.files.push({ name, size, mtimeMs: h.clock.now() - ageMs });
}

describe("ImportFolder.scan()", () => {
  test("imports each archive once, in name order, and says so in a Normal event", async () => {
    const h = harness();
    put(h, "b.tar");
    put(h, "a.tar.gz");
    h.outcome.set("a.tar.gz", ["docker.io/library/a:1"]);
    await h.folder.scan(signal);
    await h.folder.scan(signal);
    expect(h.imports).toEqual(["/imports/a.tar.gz", "/imports/b.tar"]);
    expect(h.events[0]).toBe(
      'Normal ImageImported: Imported docker.io/library/a:1 from image archive "a.tar.gz"',
    );
  });

  test("a failed archive gives a Warning event and is not tried again until it changes", async () => {
    const h = harness();
    put(h, "bad.tar");
    h.outcome.set("bad.tar", new Error("not a readable tar archive: truncated"));
    await h.folder.scan(signal);
    await h.folder.scan(signal);
    expect(h.imports).toEqual(["/imports/bad.tar"]);
    expect(h.events).toEqual([
      'Warning ImageImportFailed: Cannot import image archive "bad.tar": not a readable tar archive: truncated',
    ]);
    put(h, "bad.tar", 20);
    h.outcome.set("bad.tar", ["x/y:1"]);
    await h.folder.scan(signal);
    expect(h.imports).toHaveLength(2);
    expect(h.folder.pinned()).toEqual(new Set(["x/y:1"]));
  });

  test("an unreachable runtime is tried again at the next scan, with no event", async () => {
    const h = harness();
    put(h, "a.tar");
    h.outcome.set(
      "a.tar",
      new CriError({
        rpc: "Leases.Create",
        grpcStatus: GrpcStatus.UNAVAILABLE,
        runtimeMessage: "down",
      }),
    );
    await h.folder.scan(signal);
    h.outcome.set("a.tar", ["a/a:1"]);
    await h.folder.scan(signal);
    expect(h.imports).toHaveLength(2);
    expect(h.events.map((e) => e.split(":")[0])).toEqual(["Normal ImageImported"]);
  });

  test("a file modified within the settle time waits for a later scan", async () => {
    const h = harness();
    put(h, "new.tar", 10, 500);
    await h.folder.scan(signal);
    expect(h.imports).toEqual([]);
    h.clock.step(2000);
    await h.folder.scan(signal);
    expect(h.imports).toEqual(["/imports/new.tar"]);
  });

  test("pins the images of archives still in the folder only", async () => {
    const h = harness();
    put(h, "a.tar");
    put(h, "b.tar");
    h.outcome.set("a.tar", ["a/a:1"]);
    h.outcome.set("b.tar", ["b/b:1", "b/b:2"]);
    await h.folder.scan(signal);
    expect(h.folder.pinned()).toEqual(new Set(["a/a:1", "b/b:1", "b/b:2"]));
    h.files = h.files.filter((f) => f.name !== "b.tar");
    await h.folder.scan(signal);
    expect(h.folder.pinned()).toEqual(new Set(["a/a:1"]));
  });

  test("a folder that cannot be listed is logged and changes nothing (pins kept)", async () => {
    const h = harness();
    put(h, "a.tar");
    h.outcome.set("a.tar", ["a/a:1"]);
    await h.folder.scan(signal);
    h.listError = new Error("EACCES");
    await h.folder.scan(signal);
    expect(h.folder.pinned()).toEqual(new Set(["a/a:1"]));
    expect(h.imports).toHaveLength(1);
  });
});

describe("isArchiveName()", () => {
  const cases: [string, boolean][] = [
    ["a.tar", true],
    ["a.tar.gz", true],
    ["a.tgz", true],
    ["a.tar.zst", true],
    ["a.tzst", true],
    [".a.tar.tmp", false],
    [".hidden.tar", false],
    ["notes.txt", false],
    ["a.tar.part", false],
  ];
  test.each(cases)("%p: %p", (name, yes) => {
    expect(isArchiveName(name)).toBe(yes);
  });
});
