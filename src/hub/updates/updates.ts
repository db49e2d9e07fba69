// Per-node agent updates on the hub (docs/hub-releases.md, "Updating one node"): the release the
// operator wants each node to run (stored, see store.ts), the `update` offer sent to its agent,
// and the latest `update.status` each agent reported (kept in memory: an agent reports again as
// it goes). Agent rollouts (src/hub/rollouts/) drive this with setWishes and what it observed.
// Hub replicas: every replica holds every wish (another's from the change log: takeWish) and what
// the replica holding each agent heard of its update (share, takeReport; shared.ts); a row older
// than this replica's own write of the same node is passed over (rvs).
import { StatusError } from "../../api/status.ts";
import {
  AGENT_FEATURES,
  RELEASES_PATH,
  type UpdateMessage,
  type UpdatePhase,
  type UpdateStatus,
} from "../../protocol/index.ts";
import { Serial } from "../../util/serial.ts";
import type { Releases } from "../releases/store.ts";
import { rfc3339 } from "../views.ts";
import type {
  SharedReport,
  StoredReports,
  UpdateStore,
  WantedChange,
  WantedRelease,
} from "./store.ts";

/** What the hub knows of a node for its update: absent when no such node joined. */
export interface UpdateNodeFacts {
  /** node.status.nodeInfo.architecture, once reported. */
  arch?: string;
  /** The agent's version from its Node (nodeInfo.kubeletVersion without "fleetlet/"). */
  version?: string;
}

export interface NodeUpdatesDeps {
  store: UpdateStore;
  releases: Pick<Releases, "get" | "list">;
  node(name: string): UpdateNodeFacts | undefined;
  now(): number;
  /** Shows a node's last status, "<phase> <version>", on its Node. */
  onReport?(node: string, text: string): void;
  /** A share with the other replicas that failed (they hear it when the agent reports again). */
  onShareFailed?(node: string, error: unknown): void;
}

/** One node's update as the API shows it (GET /api/v1/updates). */
export interface NodeUpdateView {
  node: string;
  arch?: string;
  /** The version its agent runs (its last hello, else its Node). */
  running?: string;
  wanted?: string;
  /** When the wanted release was set (RFC 3339). */
  setAt?: string;
  /** The agent's last reported phase; "done" when it runs the wanted version and reported
   * nothing of it (an agent that was already running it). */
  phase?: UpdatePhase | "done";
  bytes?: number;
  total?: number;
  reason?: string;
  message?: string;
  /** The version the last status is of, when it is not the wanted one (a stale status). */
  staleVersion?: string;
  /** When the last status was received (RFC 3339). */
  reportedAt?: string;
  /** Why the hub cannot offer the wanted release ("no release 0.2.0 for arm64"). */
  problem?: string;
}

interface Reported {
  status: UpdateStatus;
  at: number;
}

export class NodeUpdates {
  private readonly wanted = new Map<string, WantedRelease>();
  private readonly reported = new Map<string, Reported>();
  /** Each node's agent as it said hello last: its version and whether it takes updates. */
  private readonly agents = new Map<string, { version: string; updates: boolean }>();
  /** Nodes whose agent was offered an update since its hello. */
  private readonly offered = new Set<string>();
  /** When each node's agent was first offered the version it was last offered. */
  private readonly firstOffered = new Map<string, { version: string; at: number }>();
  /** The wishes' writes, one at a time (memory follows each in the order it was stored). */
  private readonly writes = new Serial();
  /** Hub replicas: the change log's number of this replica's latest write of each node's wish
   * ("w:" + node) and share of its reports ("r:" + node): an older row of another is passed. */
  private readonly rvs = new Map<string, number>();

  /** `loaded`: the store's wishes (UpdateStore.load); `reports`: what replicas shared of each
   * node's update (UpdateStore.loadReports). */
  constructor(
    private readonly deps: NodeUpdatesDeps,
    loaded: readonly WantedRelease[],
    reports: readonly StoredReports[] = [],
  ) {
    for (const w of loaded) this.wanted.set(w.node, w);
    for (const r of reports) {
      if (r.status !== undefined) {
        this.reported.set(r.node, r.status);
        deps.onReport?.(r.node, `${r.status.status.phase} ${r.status.status.version}`);
      }
      if (r.offered !== undefined) this.firstOffered.set(r.node, r.offered);
      if (r.agent !== undefined) this.agents.set(r.node, r.agent);
    }
  }

  /** The release wanted for `node`, if any. */
  wantedFor(node: string): WantedRelease | undefined {
    return this.wanted.get(node);
  }

  /** The nodes that want release `version` (to offer it when it is pushed). */
  nodesWanting(version: string): string[] {
    return [...this.wanted.values()].filter((w) => w.version === version).map((w) => w.node);
  }

  /** Sets the release `node` should run: NotFound for an unknown node or a version with no
   * release for any arch. Stored before it returns. */
  async set(node: string, version: string): Promise<WantedRelease> {
    if (this.deps.node(node) === undefined)
      throw new StatusError("NotFound", `node "${node}" not found`);
    const known = (await this.deps.releases.list()).some((r) => r.version === version);
    if (!known)
      throw new StatusError(
        "NotFound",
        `release ${version} not found: push it first (fleetlet hub release push)`,
      );
    return this.setWanted(node, version);
  }

  /** Sets the release `node` should run, unchecked (an agent rollout, which checked the
   * version and the node); stored before it returns. */
  async setWanted(node: string, version: string): Promise<WantedRelease> {
    const w = { node, version, setAt: this.deps.now() };
    await this.write([w]);
    return w;
  }

  /**
   * Sets the wishes of several nodes (`null`: none) in one write, unchecked (an agent rollout's
   * pass); the nodes whose wish changed, once stored.
   */
  async setWishes(wishes: ReadonlyMap<string, string | null>): Promise<string[]> {
    const now = this.deps.now();
    const changes: WantedChange[] = [];
    for (const [node, version] of wishes) {
      if (this.wanted.get(node)?.version === (version ?? undefined)) continue;
      changes.push(version === null ? { node, version } : { node, version, setAt: now });
    }
    await this.write(changes);
    return changes.map((c) => c.node);
  }

  /** Stores `changes`, then holds them. */
  private write(changes: WantedChange[]): Promise<void> {
    if (changes.length === 0) return Promise.resolve();
    return this.writes.run(async () => {
      const rv = await this.deps.store.write(changes);
      for (const c of changes) {
        if (rv !== undefined) this.rvs.set(`w:${c.node}`, rv);
        this.setWish(c);
      }
    });
  }

  private setWish(c: WantedChange): void {
    if (c.version === null) this.wanted.delete(c.node);
    else this.wanted.set(c.node, c);
  }

  /** Whether a row numbered `rv` of `key` is newer than what this replica wrote of it. */
  private newer(key: string, rv: number): boolean {
    if ((this.rvs.get(key) ?? 0) >= rv) return false;
    this.rvs.delete(key);
    return true;
  }

  /** Takes a wish another replica stored, numbered `rv` in the change log; whether it changed
   * what this replica holds (then its agent, if connected here, is offered it). */
  takeWish(c: WantedChange, rv: number): boolean {
    if (!this.newer(`w:${c.node}`, rv)) return false;
    const old = this.wanted.get(c.node);
    this.setWish(c);
    return (
      old?.version !== (c.version ?? undefined) || old?.setAt !== this.wanted.get(c.node)?.setAt
    );
  }

  /** Hub replicas: loads the stored wishes in place of those held (this replica fell behind
   * the change log's trim); gives the nodes whose wish changed. */
  async reloadWishes(): Promise<string[]> {
    const loaded = await this.deps.store.load();
    return this.writes.run(async () => {
      const next = new Map(loaded.map((w) => [w.node, w]));
      const changed = [...new Set([...this.wanted.keys(), ...next.keys()])].filter(
        (n) =>
          this.wanted.get(n)?.version !== next.get(n)?.version ||
          this.wanted.get(n)?.setAt !== next.get(n)?.setAt,
      );
      this.wanted.clear();
      for (const [n, w] of next) this.wanted.set(n, w);
      for (const key of [...this.rvs.keys()]) if (key.startsWith("w:")) this.rvs.delete(key);
      return changed;
    });
  }

  /** Takes what the replica holding `node`'s agent heard of its update, numbered `rv`. */
  takeReport(node: string, r: SharedReport, rv: number): void {
    if (!this.newer(`r:${node}`, rv)) return;
    if ("status" in r) {
      this.reported.set(node, { status: r.status, at: r.at });
      this.deps.onReport?.(node, `${r.status.phase} ${r.status.version}`);
    } else if ("offered" in r) this.firstOffered.set(node, { version: r.offered, at: r.at });
    else this.agents.set(node, r.agent);
  }

  /** Tells the other replicas (if any) what this one heard of `node`'s update. */
  private share(node: string, r: SharedReport): void {
    const share = this.deps.store.share;
    if (share === undefined) return;
    share.call(this.deps.store, node, r).then(
      (rv) => {
        if (rv !== undefined)
          this.rvs.set(`r:${node}`, Math.max(rv, this.rvs.get(`r:${node}`) ?? 0));
      },
      (err: unknown) => this.deps.onShareFailed?.(node, err),
    );
  }

  /** The last status the agent of `node` reported, if any. */
  lastStatus(node: string): UpdateStatus | undefined {
    return this.reported.get(node)?.status;
  }

  /** When the agent of `node` was first offered `version` (the latest version offered it). */
  offeredAt(node: string, version: string): number | undefined {
    const o = this.firstOffered.get(node);
    return o?.version === version ? o.at : undefined;
  }

  /** Cancels `node`'s wanted release (the device keeps what it runs); whether there was one. */
  async cancel(node: string): Promise<boolean> {
    if (this.deps.node(node) === undefined)
      throw new StatusError("NotFound", `node "${node}" not found`);
    if (!this.wanted.has(node)) return false;
    await this.write([{ node, version: null }]);
    return true;
  }

  /** Node `name` was forgotten: its wanted release and status go too. */
  async forget(node: string): Promise<void> {
    await this.write([{ node, version: null }]);
    this.reported.delete(node);
    this.agents.delete(node);
    this.offered.delete(node);
    this.firstOffered.delete(node);
    this.rvs.delete(`r:${node}`);
  }

  /** The agent of `node` said hello with `features`, running `version`. */
  hello(node: string, version: string, features: readonly string[] | undefined): void {
    const agent = { version, updates: features?.includes(AGENT_FEATURES.updates) === true };
    this.agents.set(node, agent);
    this.offered.delete(node);
    // Shared only for a node in an update: every agent's every hello would be a write.
    if (this.wanted.has(node) || this.reported.has(node)) this.share(node, { agent });
  }

  /** The agent of `node` reported `status` (the latest wins). */
  report(node: string, status: UpdateStatus): void {
    const at = this.deps.now();
    this.reported.set(node, { status, at });
    this.deps.onReport?.(node, `${status.phase} ${status.version}`);
    this.share(node, { status, at });
  }

  /** The version `node`'s agent runs, as last known. */
  running(node: string): string | undefined {
    return this.agents.get(node)?.version ?? this.deps.node(node)?.version;
  }

  /**
   * The `update` message for the agent of `node`, which said hello: undefined when it does not
   * take updates, no release is wanted, it runs the wanted version already, or no release of
   * the wanted version exists for its arch. `unlessOffered`: none either when one was offered
   * since its hello (a Node report, which may bring its arch).
   */
  async offer(node: string, unlessOffered = false): Promise<UpdateMessage | undefined> {
    if (unlessOffered && this.offered.has(node)) return undefined;
    const agent = this.agents.get(node);
    const w = this.wanted.get(node);
    if (agent === undefined || !agent.updates || w === undefined) return undefined;
    if (agent.version === w.version) return undefined;
    const arch = this.deps.node(node)?.arch;
    if (arch !== "amd64" && arch !== "arm64") return undefined;
    const r = await this.deps.releases.get(w.version, arch);
    if (r === undefined || this.wanted.get(node) !== w) return undefined;
    const path = `${RELEASES_PATH}/${encodeURIComponent(w.version)}/${arch}`;
    this.offered.add(node);
    if (this.firstOffered.get(node)?.version !== w.version) {
      const at = this.deps.now();
      this.firstOffered.set(node, { version: w.version, at });
      this.share(node, { offered: w.version, at });
    }
    return { type: "update", version: w.version, arch, manifest: r.manifest, path };
  }

  /** The update views of every node with a wanted release or a status, or of `node` alone. */
  async views(node?: string): Promise<NodeUpdateView[]> {
    const names = new Set([...this.wanted.keys(), ...this.reported.keys()]);
    if (node !== undefined) {
      if (this.deps.node(node) === undefined)
        throw new StatusError("NotFound", `node "${node}" not found`);
      names.clear();
      names.add(node);
    }
    const out: NodeUpdateView[] = [];
    for (const name of [...names].sort()) out.push(await this.view(name));
    return out;
  }

  private async view(node: string): Promise<NodeUpdateView> {
    const arch = this.deps.node(node)?.arch;
    const running = this.running(node);
    const w = this.wanted.get(node);
    const v: NodeUpdateView = {
      node,
      ...(arch !== undefined && { arch }),
      ...(running !== undefined && { running }),
      ...(w !== undefined && { wanted: w.version, setAt: rfc3339(w.setAt) }),
    };
    const r = this.reported.get(node);
    if (r !== undefined) Object.assign(v, statusFields(r, w?.version));
    if (w === undefined) return v;
    if (running === w.version) {
      if (r?.status.version !== w.version) v.phase = "done";
      return v;
    }
    const problem = await this.problem(w.version, arch);
    if (problem !== undefined) v.problem = problem;
    return v;
  }

  /** Why release `version` cannot be offered to a node of `arch`, if it cannot. */
  private async problem(version: string, arch: string | undefined): Promise<string | undefined> {
    if (arch === undefined)
      return `no release ${version} for the node's arch: it has not reported it yet`;
    if ((await this.deps.releases.get(version, arch)) === undefined)
      return `no release ${version} for ${arch}`;
    return undefined;
  }
}

/** The fields of a reported status; `staleVersion` when it is not of the wanted version. */
function statusFields(r: Reported, wanted: string | undefined): Partial<NodeUpdateView> {
  const s = r.status;
  return {
    phase: s.phase,
    ...(s.bytes !== undefined && { bytes: s.bytes }),
    ...(s.total !== undefined && { total: s.total }),
    ...(s.reason !== undefined && { reason: s.reason }),
    ...(s.message !== undefined && { message: s.message }),
    ...(s.version !== wanted && { staleVersion: s.version }),
    reportedAt: rfc3339(r.at),
  };
}
