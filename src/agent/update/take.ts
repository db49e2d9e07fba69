// The agent taking an update the hub offered (docs/agent-updates.md, "The agent's part"): the
// manifest checked against the device's own keys and arch before any byte is fetched, the
// release downloaded (resumable, rate-limited, verified), and installed as a version on trial.
// The caller then exits, and the launcher starts the new version.
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { PublicKey } from "../../release/keys.ts";
import type { Arch } from "../../release/manifest.ts";
import { ReleaseCheckError, verifyManifest } from "../../release/verify.ts";
import { type Clock, realClock } from "../../util/clock.ts";
import { downloadRelease } from "./download.ts";
import { DownloadError } from "./errors.ts";
import { installVersion, linkedVersion, versionName } from "./install.ts";
import { dropOtherDownloads, holdsRelease } from "./kept.ts";
import { testPause } from "./test-pause.ts";
import { rolledBackReason } from "./trial.ts";

/** Why the device takes no update; `reason` is what the hub is told. */
export class UpdateRefused extends Error {
  override readonly name = "UpdateRefused";
  constructor(
    readonly reason: "no-launcher" | "no-keys" | "malformed" | "signature" | "arch" | "rolled-back",
    message: string,
  ) {
    super(message);
  }
}

export interface UpdateOffer {
  /** The release manifest's text, as the hub sent it. */
  manifest: string;
  /** Where the hub serves the release's compressed bytes. */
  url: string;
}

export interface UpdateTaker {
  /** The launcher's state folder (updateDir). */
  dir: string;
  /** The device's trusted release keys (updatePublicKeys). */
  keys: readonly PublicKey[];
  /** The device's own arch. */
  arch: Arch;
  /** Whether the launcher started this agent: without one, nothing would run the new version. */
  launched: boolean;
  /** Sent with the download (the node's credential). */
  headers?: Record<string, string>;
  bandwidthLimit?: number;
  fetch?: (url: string, init: RequestInit) => Promise<Response>;
  clock?: Clock;
}

export interface Taken {
  /** The installed version's folder name. */
  name: string;
  /** The version already runs: nothing was fetched or installed. */
  already: boolean;
  resumedFrom: number;
  fetched: number;
  /** The executable an earlier try left was used again: its verified download, or the version
   * installed before the try was cut; then nothing was fetched. */
  reused?: "download" | "version";
}

/** How long an update waits for the launcher to close a passed trial before it tries later. */
const TRIAL_CLOSE_WAIT_MS = 30_000;

/**
 * Waits while `healthy` is there: the launcher has not yet closed the trial this agent passed,
 * and it removes the versions that neither `current` nor `previous` names before it does, so a
 * version installed meanwhile could be removed under it. Throws a DownloadError (tried again
 * later) when the launcher does not close it in time.
 */
async function untilTrialClosed(t: UpdateTaker, signal?: AbortSignal): Promise<void> {
  const clock = t.clock ?? realClock;
  const until = clock.monotonic() + TRIAL_CLOSE_WAIT_MS;
  while (existsSync(join(t.dir, "healthy"))) {
    if (clock.monotonic() >= until)
      throw new DownloadError(
        "interrupted",
        "the launcher has not closed the trial this agent passed (`healthy` is still there)",
      );
    await clock.sleep(200, signal);
  }
}

/**
 * Checks `offer` and installs its release on trial. Throws UpdateRefused (the device cannot or
 * must not take it), or the download's DownloadError (retry later: a cut resumes).
 */
export async function takeUpdate(
  t: UpdateTaker,
  offer: UpdateOffer,
  signal?: AbortSignal,
): Promise<Taken> {
  if (!t.launched)
    throw new UpdateRefused("no-launcher", "the agent was not started by fleetlet-launch");
  if (t.keys.length === 0)
    throw new UpdateRefused("no-keys", "the device trusts no release key (updatePublicKeys)");
  const { manifest } = await verifyManifest(offer.manifest, t.keys, t.arch).catch((err) => {
    const reason = err instanceof ReleaseCheckError ? err.reason : undefined;
    if (reason === "malformed" || reason === "signature" || reason === "arch")
      throw new UpdateRefused(reason, err.message);
    throw err;
  });
  const name = versionName(manifest.version, manifest.sha256);
  if (linkedVersion(t.dir, "current") === name)
    return { name, already: true, resumedFrom: 0, fetched: 0 };
  const before = rolledBackReason(t.dir, name);
  if (before !== undefined)
    throw new UpdateRefused(
      "rolled-back",
      `the launcher rolled this device back from ${name} before (${before}): it does not take that release again`,
    );
  await untilTrialClosed(t, signal);
  const base = `${t.dir}/download/${manifest.sha256}`;
  await dropOtherDownloads(`${t.dir}/download`, manifest.sha256);
  if (await holdsRelease(`${t.dir}/versions/${name}/fleetlet`, manifest)) {
    installVersion(t.dir, name);
    return { name, already: false, resumedFrom: 0, fetched: 0, reused: "version" };
  }
  if (await holdsRelease(`${base}.bin`, manifest)) {
    testPause("verified");
    installVersion(t.dir, name, `${base}.bin`);
    return { name, already: false, resumedFrom: 0, fetched: 0, reused: "download" };
  }
  const got = await downloadRelease({
    url: offer.url,
    manifest,
    partPath: `${base}.part`,
    outPath: `${base}.bin`,
    ...(t.headers !== undefined && { headers: t.headers }),
    ...(t.bandwidthLimit !== undefined && { bandwidthLimit: t.bandwidthLimit }),
    ...(signal !== undefined && { signal }),
    ...(t.fetch !== undefined && { fetch: t.fetch }),
    ...(t.clock !== undefined && { clock: t.clock }),
  });
  testPause("verified");
  installVersion(t.dir, name, `${base}.bin`);
  return { name, already: false, ...got };
}
