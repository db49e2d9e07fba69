// Path patterns of host device groups (the agent config's hostDevices[].paths): absolute paths
// whose segments may hold the wildcards `*`, `?` and `[...]` (`[!...]` negates). A wildcard
// matches within one folder level, in any segment ("/dev/bus/usb/*/*"); there is no `**`, no
// braces and no escapes, so that the folders a pattern depends on are known from the pattern.
// Matching one segment is Bun.Glob's.

const WILDCARD = /[*?[]/;

/** What is wrong with `pattern` as a host device path pattern, or undefined when it is fine. */
export function hostDevicePatternProblem(pattern: string): string | undefined {
  if (!pattern.startsWith("/")) return 'must be an absolute path, e.g. "/dev/ttyUSB*"';
  if (pattern.endsWith("/")) return 'must name device files, not end with "/"';
  if (pattern.includes("//")) return 'must not have an empty segment ("//")';
  if (pattern.includes("**"))
    return 'must not contain "**": a wildcard matches within one folder level';
  if (/[{}\\]/.test(pattern))
    return "must not contain {, } or \\: the wildcards are *, ? and [...]";
  for (const segment of patternSegments(pattern)) {
    if (segment === "." || segment === "..") return 'must not have "." or ".." segments';
    if (segment.startsWith("!")) return 'must not have a segment starting with "!"';
    if (!bracketsClosed(segment)) return `has a "[" without its "]" in ${JSON.stringify(segment)}`;
  }
  return undefined;
}

/** Whether every "[" of `segment` opens a class closed by a later "]" (a "]" right after "[" or
 * "[!" belongs to the class). */
function bracketsClosed(segment: string): boolean {
  for (let i = 0; i < segment.length; i++) {
    if (segment[i] !== "[") continue;
    let j = i + 1;
    if (segment[j] === "!" || segment[j] === "^") j++;
    if (segment[j] === "]") j++;
    const close = segment.indexOf("]", j);
    if (close < 0) return false;
    i = close;
  }
  return true;
}

/** One segment of a pattern: a name, or a wildcard matching names. */
export type PatternSegment = { name: string } | { wildcard: string; glob: Bun.Glob };

/** The segments of an absolute pattern: "/dev/serial/by-id/*" → dev, serial, by-id, then a
 * wildcard. */
export function compilePattern(pattern: string): PatternSegment[] {
  return patternSegments(pattern).map((s) =>
    WILDCARD.test(s) ? { wildcard: s, glob: new Bun.Glob(s) } : { name: s },
  );
}

function patternSegments(pattern: string): string[] {
  return pattern.split("/").filter((s) => s !== "");
}
