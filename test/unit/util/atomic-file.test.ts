// writeFileAtomic on a disk that fills up: the old file stays whole, the temp file goes, and the
// error names the file and keeps the system's code. The failing disk is an injected fs.
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import * as fs from "node:fs";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  type AtomicFs,
  errorCode,
  FileWriteError,
  writeFileAtomic,
} from "../../../src/util/atomic-file.ts";

/** writeSync as writeFileAtomic calls it: bytes, offset, length. */
type WriteBytes = (fd: number, buf: Buffer, off: number, len: number) => number;
const asWriteSync = (w: WriteBytes) => w as unknown as AtomicFs["writeSync"];

function enospc(syscall: string): NodeJS.ErrnoException {
  const err = new Error(`ENOSPC: no space left on device, ${syscall}`) as NodeJS.ErrnoException;
  err.code = "ENOSPC";
  return err;
}

/** The real fs, but with only `free` bytes left for writes: a write past them writes what fits
 * and then fails with ENOSPC, as a full ext4 does. */
function fullDisk(free: number): AtomicFs {
  let left = free;
  return {
    ...fs,
    writeSync: asWriteSync((fd, buf, off, len) => {
      if (left === 0) throw enospc("write");
      const n = Math.min(len, left);
      left -= n;
      return fs.writeSync(fd, buf, off, n);
    }),
  };
}

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "atomic-file-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe("writeFileAtomic", () => {
  test("writes the whole text with the mode asked, even when each write is short", () => {
    const path = join(dir, "sub", "state.json");
    const oneByte: AtomicFs = {
      ...fs,
      writeSync: asWriteSync((fd, buf, off) => fs.writeSync(fd, buf, off, 1)),
    };
    writeFileAtomic(path, '{"ünïcode":true}\n', { mode: 0o644, fs: oneByte });
    expect(readFileSync(path, "utf8")).toBe('{"ünïcode":true}\n');
    expect(statSync(path).mode & 0o777).toBe(0o644);
    expect(readdirSync(join(dir, "sub"))).toEqual(["state.json"]);
  });

  test("a full disk leaves the old file whole, removes the temp file and names the file", () => {
    const path = join(dir, "checkpoint");
    writeFileSync(path, "old content\n");
    for (const free of [0, 5]) {
      let thrown: unknown;
      try {
        writeFileAtomic(path, "new content that does not fit\n", { fs: fullDisk(free) });
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(FileWriteError);
      expect((thrown as FileWriteError).message).toBe(
        `cannot write ${path}: ENOSPC: no space left on device, write`,
      );
      expect((thrown as FileWriteError).path).toBe(path);
      expect(errorCode(thrown)).toBe("ENOSPC");
      expect(readFileSync(path, "utf8")).toBe("old content\n");
      expect(readdirSync(dir)).toEqual(["checkpoint"]);
    }
  });

  test("a failing fsync, rename or open leaves the old file whole and no temp file", () => {
    const path = join(dir, "credential");
    writeFileSync(path, "secret\n");
    const failing: [string, Partial<AtomicFs>][] = [
      [
        "fsync",
        {
          fsyncSync: () => {
            throw enospc("fsync");
          },
        },
      ],
      [
        "rename",
        {
          renameSync: () => {
            throw enospc("rename");
          },
        },
      ],
      [
        "open",
        {
          openSync: (() => {
            throw enospc("open");
          }) as AtomicFs["openSync"],
        },
      ],
    ];
    for (const [what, override] of failing) {
      let thrown: unknown;
      try {
        writeFileAtomic(path, "other\n", { fs: { ...fs, ...override } });
      } catch (err) {
        thrown = err;
      }
      expect({ what, message: (thrown as Error).message }).toEqual({
        what,
        message: `cannot write ${path}: ENOSPC: no space left on device, ${what}`,
      });
      expect(readFileSync(path, "utf8")).toBe("secret\n");
      expect(readdirSync(dir)).toEqual(["credential"]);
    }
  });

  test("writes again once space returns", () => {
    const path = join(dir, "outbox");
    writeFileSync(path, "old\n");
    expect(() => writeFileAtomic(path, "new\n", { fs: fullDisk(0) })).toThrow(FileWriteError);
    writeFileAtomic(path, "new\n");
    expect(readFileSync(path, "utf8")).toBe("new\n");
  });
});
