// A Debian 12 root for package tests: made once with mmdebstrap from Debian's packages (minbase
// and systemd, as on a device), cached under the test bed's folder and rebuilt when its recipe or
// mmdebstrap changes; each test works on a copy and runs dpkg and apt in it with chroot. Needs
// root, mmdebstrap (scripts/setup installs it) and Debian's mirror on the first run only.
import { createHash } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { repoRoot } from "./testbed.ts";

/** mmdebstrap's arguments before the suite and the target: the root's whole recipe. */
const RECIPE = [
  "--quiet",
  "--variant=minbase",
  "--include=systemd",
  "--dpkgopt=path-exclude=/usr/share/doc/*",
  "--dpkgopt=path-exclude=/usr/share/man/*",
  "--dpkgopt=path-exclude=/usr/share/locale/*",
];
const SUITE = "bookworm";

/** The output of a command; throws with its stderr when it fails. */
export function run(argv: string[], env?: Record<string, string>): string {
  const p = Bun.spawnSync(argv, {
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
    ...(env !== undefined && { env }),
  });
  if (p.exitCode !== 0) {
    throw new Error(`${argv.join(" ")} exited with ${p.exitCode}: ${p.stderr.toString()}`);
  }
  return p.stdout.toString();
}

function recipeKey(): string {
  // biome-ignore lint/suspicious/noTemplateCurlyInString: dpkg-query's own format
  const mmdebstrap = run(["dpkg-query", "-W", "-f=${Version}", "mmdebstrap"]);
  return createHash("sha256")
    .update(JSON.stringify([RECIPE, SUITE, mmdebstrap]))
    .digest("hex")
    .slice(0, 16);
}

/** The cached root (made if missing or stale): never written to by tests; copy it first. */
function cachedDebianRoot(): string {
  const base = join(process.env.FLEETLET_TESTBED ?? join(repoRoot, ".testbed"), "debian-root");
  const key = recipeKey();
  const root = join(base, key);
  if (existsSync(join(root, ".fleetlet-complete"))) return root;
  mkdirSync(base, { recursive: true });
  // Older roots go; a half-made one (an interrupted run) is made again.
  for (const old of readdirSync(base)) rmSync(join(base, old), { recursive: true, force: true });
  const tmp = `${root}.new-${process.pid}`;
  run(["mmdebstrap", ...RECIPE, SUITE, tmp]);
  writeFileSync(join(tmp, ".fleetlet-complete"), `${key}\n`);
  renameSync(tmp, root);
  return root;
}

/** A copy of the cached root at `dest` (removed first), for one test to change. */
export function copyDebianRoot(dest: string): string {
  const source = cachedDebianRoot();
  rmSync(dest, { recursive: true, force: true });
  run(["cp", "-a", "--reflink=auto", source, dest]);
  return dest;
}

/** Runs `argv` inside `root` (chroot) with Debian's non-interactive front end and no stdin, so
 * that a prompt fails instead of waiting. */
export function inRoot(root: string, argv: string[]): string {
  return run([
    "chroot",
    root,
    "env",
    "-i",
    "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
    "DEBIAN_FRONTEND=noninteractive",
    "LC_ALL=C",
    ...argv,
  ]);
}

/** The text of a file inside `root`, or undefined if it is not there. */
export function readInRoot(root: string, path: string): string | undefined {
  const file = join(root, path);
  return existsSync(file) ? readFileSync(file, "utf8") : undefined;
}
