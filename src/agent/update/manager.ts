// The agent's update manager (docs/agent-updates.md, "The agent's part"): it takes the releases
// the hub offers, one at a time, and tells the hub where each stands (update.status). A refused
// offer is said once; a failed download is tried again with back-off (a cut resumes) while the
// offer stands; an installed release makes the agent stop, so that the launcher starts it on
// trial. An agent on trial says "healthy" once the launcher has its word, and an agent the
// launcher rolled back to says "rolled-back".

import type { UpdateMessage, UpdateStatus } from "../../protocol/update.ts";
import type { PublicKey } from "../../release/keys.ts";
import type { Arch } from "../../release/manifest.ts";
import { type Clock, sleepQuietly } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import { DownloadError } from "./errors.ts";
import { takeUpdate, UpdateRefused } from "./take.ts";

/** What the hub client gives the update manager. */
export interface UpdateLink {
  /** The hub's base URL (https://hub:7443): of the hub URL the agent was last welcomed at. */
  readonly base: string;
  /** fetch with the hub's CA. */
  fetch(url: string, init: RequestInit): Promise<Response>;
  /** The node's credential. */
  credential(): Promise<string>;
  /** Sends an update.status if a connection is welcomed; whether it was sent. */
  send(status: Omit<UpdateStatus, "type">): boolean;
}

export interface UpdateManagerDeps {
  dir: string;
  keys: readonly PublicKey[];
  arch: Arch;
  launched: boolean;
  bandwidthLimit: number;
  clock: Clock;
  logger: Logger;
  /** Stops the agent so that the launcher starts the installed version. */
  restart(): void;
  /** First wait after a failed download; doubled up to 5 minutes (default 10 s). */
  retryBaseMs?: number;
}

type Status = Omit<UpdateStatus, "type">;

export class UpdateManager {
  private link: UpdateLink | undefined;
  /** The offer being taken, or last taken. */
  private wanted: UpdateMessage | undefined;
  private running = false;
  /** The last status, sent again after each welcome. */
  private last: Status | undefined;
  private readonly stop = new AbortController();

  constructor(private readonly deps: UpdateManagerDeps) {}

  bind(link: UpdateLink): void {
    this.link = link;
  }

  /** A connection was welcomed: the hub hears the last status again. */
  reconnected(): void {
    if (this.last !== undefined) this.link?.send(this.last);
  }

  /** Says `status` to the hub (now if connected, else after the next welcome). */
  report(status: Status): void {
    this.last = status;
    this.link?.send(status);
  }

  /** The hub offers `m`: taken in the background unless the same offer is being taken. */
  offer(m: UpdateMessage): void {
    const same = this.wanted?.version === m.version && this.wanted.manifest === m.manifest;
    this.wanted = m;
    if (same && this.running) return;
    if (!this.running) void this.take();
  }

  close(): void {
    this.stop.abort();
  }

  private async take(): Promise<void> {
    this.running = true;
    let waitMs = this.deps.retryBaseMs ?? 10_000;
    try {
      while (this.wanted !== undefined && !this.stop.signal.aborted) {
        const offer = this.wanted;
        const done = await this.attempt(offer);
        if (done && this.wanted === offer) return;
        if (this.wanted !== offer) continue;
        await sleepQuietly(this.deps.clock, waitMs, this.stop.signal);
        waitMs = Math.min(waitMs * 2, 300_000);
      }
    } finally {
      this.running = false;
    }
  }

  /** One try at `offer`; whether it is settled (installed, refused, or running already). */
  private async attempt(offer: UpdateMessage): Promise<boolean> {
    const { deps, link } = this;
    const log = deps.logger;
    if (link === undefined) return false;
    const version = offer.version;
    try {
      this.report({ version, phase: "downloading" });
      const taken = await takeUpdate(
        {
          ...{ dir: deps.dir, keys: deps.keys, arch: deps.arch, launched: deps.launched },
          headers: { authorization: `Bearer ${await link.credential()}` },
          bandwidthLimit: deps.bandwidthLimit,
          fetch: (url, init) => link.fetch(url, init),
          clock: deps.clock,
        },
        { manifest: offer.manifest, url: `${link.base.replace(/\/+$/, "")}${offer.path}` },
        this.stop.signal,
      );
      if (taken.already) {
        this.report({ version, phase: "healthy", message: "this version runs already" });
        return true;
      }
      log.info("agent update installed: stopping so that the launcher starts it on trial", {
        version: taken.name,
        resumedFrom: taken.resumedFrom,
        fetched: taken.fetched,
        ...(taken.reused !== undefined && { reused: taken.reused }),
      });
      this.report(
        taken.reused === undefined
          ? { version, phase: "restarting", total: taken.resumedFrom + taken.fetched }
          : {
              version,
              phase: "restarting",
              message: `used again the ${taken.reused} an earlier try left`,
            },
      );
      deps.restart();
      return true;
    } catch (err) {
      if (this.stop.signal.aborted) return true; // the agent is stopping
      return this.failed(version, err);
    }
  }

  private failed(version: string, err: unknown): boolean {
    const log = this.deps.logger;
    const message = err instanceof Error ? err.message : String(err);
    if (err instanceof UpdateRefused) {
      log.warn("agent update refused", { version, reason: err.reason, error: message });
      this.report({ version, phase: "refused", reason: err.reason, message });
      return true;
    }
    const reason = err instanceof DownloadError ? err.reason : failureOf(err);
    log.warn("agent update failed; trying again later", { version, reason, error: message });
    this.report({ version, phase: "failed", reason, message });
    return false;
  }
}

/** The file system's errors of a full, read-only or failing disk. */
const DISK_ERRORS = new Set(["ENOSPC", "EDQUOT", "EROFS", "EIO", "EACCES", "EPERM"]);

/** Why a try failed that the download did not name: the disk, or else the way to the hub. */
function failureOf(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" && DISK_ERRORS.has(code) ? "disk" : "interrupted";
}
