// Build facts, set by scripts/build through `bun build --define`; a run from source says "dev".
declare const FLEETLET_VERSION: string | undefined;
declare const FLEETLET_COMMIT: string | undefined;

export interface BuildInfo {
  version: string;
  commit: string;
  bunVersion: string;
  platform: string;
  arch: string;
}

export function buildInfo(): BuildInfo {
  return {
    version: typeof FLEETLET_VERSION === "string" ? FLEETLET_VERSION : "0.0.0-dev",
    commit: typeof FLEETLET_COMMIT === "string" ? FLEETLET_COMMIT : "dev",
    bunVersion: Bun.version,
    platform: process.platform,
    arch: process.arch,
  };
}
