// A bundle-time macro: `asset("app.js")` is replaced by the file's text when Bun transpiles the
// importer (`bun build --compile` and `bun test` alike), so every dashboard file is inside the
// executable and nothing is read from disk at run time.
import { readFileSync } from "node:fs";
import { join } from "node:path";

/** The text of `name`, a file in this folder. */
export function asset(name: string): string {
  return readFileSync(join(import.meta.dir, name), "utf8");
}
