// Cgroup names in systemd's form, as the kubelet's systemd driver writes them. fleetlet names a
// cgroup by its cgroupfs path ("/kubepods/burstable/pod<uid>"); under systemd each level is a
// slice whose unit name joins every level above it with "-" ("kubepods-burstable-pod<uid>.slice"),
// so a "-" inside a level is written "_" ("pod1234-ab" → "pod1234_ab"), and the slice's own
// cgroup lies under each of its parents' ("/kubepods.slice/kubepods-burstable.slice/…").
// A level that holds "_" could not be read back, so it is refused, as the kubelet refuses it.

const SUFFIX = ".slice";

/** The levels of cgroupfs name `name` ("/a/b" → ["a", "b"]); throws for a level a slice cannot
 * hold: ".." or one with "_". */
function levels(name: string): string[] {
  const parts = name.split("/").filter((p) => p !== "" && p !== ".");
  for (const p of parts) {
    if (p === ".." || p.includes("_")) {
      throw new Error(
        `cgroup name ${JSON.stringify(name)} has level ${JSON.stringify(p)}, which a systemd slice cannot hold`,
      );
    }
  }
  return parts;
}

/** The slice unit of cgroupfs name `name`: "/" → "-.slice",
 * "/kubepods/burstable/pod12-ab" → "kubepods-burstable-pod12_ab.slice". */
export function sliceName(name: string): string {
  const parts = levels(name);
  if (parts.length === 0) return `-${SUFFIX}`;
  return `${parts.map((p) => p.replaceAll("-", "_")).join("-")}${SUFFIX}`;
}

/** The cgroup path of slice unit `slice` below the cgroup mount:
 * "kubepods-burstable.slice" → "/kubepods.slice/kubepods-burstable.slice", "-.slice" → "/".
 * Throws for a name that is not a slice ("/" inside, no ".slice", an empty level). */
export function expandSlice(slice: string): string {
  const bad = () => new Error(`${JSON.stringify(slice)} is not a systemd slice name`);
  if (!slice.endsWith(SUFFIX) || slice.length === SUFFIX.length || slice.includes("/")) throw bad();
  const stem = slice.slice(0, -SUFFIX.length);
  if (stem === "-") return "/";
  const parts = stem.split("-");
  if (parts.includes("")) throw bad();
  return parts.map((_, i) => `/${parts.slice(0, i + 1).join("-")}${SUFFIX}`).join("");
}

/** Cgroupfs name `name` in systemd's form, the path the runtime is given as a cgroup parent:
 * "/kubepods/besteffort" → "/kubepods.slice/kubepods-besteffort.slice". */
export function systemdCgroupPath(name: string): string {
  return expandSlice(sliceName(name));
}

/** The cgroupfs name of a slice, given as its unit name or its expanded path:
 * "kubepods-burstable-pod12_ab.slice" → "/kubepods/burstable/pod12-ab". A path must be the one
 * its last slice expands to. */
export function cgroupNameOfSlice(slice: string): string {
  if (slice === "/") return "/";
  const unit = slice.slice(slice.lastIndexOf("/") + 1);
  const path = expandSlice(unit);
  if (slice.includes("/") && slice !== path) {
    throw new Error(
      `${JSON.stringify(slice)} is not a systemd slice name or path (${unit} lies at ${path})`,
    );
  }
  const stem = unit.slice(0, -SUFFIX.length);
  if (stem === "-") return "/";
  return `/${stem
    .split("-")
    .map((p) => p.replaceAll("_", "-"))
    .join("/")}`;
}

/** Cgroupfs name `name` as the cgroup driver `driver` makes it on the host. */
export function literalCgroupName(driver: "cgroupfs" | "systemd", name: string): string {
  return driver === "systemd" ? systemdCgroupPath(name) : name;
}
