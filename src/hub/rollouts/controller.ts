// The agent rollouts of the hub (docs/hub-releases.md, "Rolling a release out to a fleet"): a
// periodic pass that, for each rollout, computes its members, asks the DaemonSet planner
// (deploy/plan.ts) over the revisions `version` and PREVIOUS, and carries out its assignments by
// setting each member's wanted release (updates/updates.ts), the member's `from` stored first.
//
// Invariants: a node is a member of one rollout at most (of the rollouts whose selector matches
// it, the one that claimed last); the record is stored before the wishes it leads to are set
// (a step's wishes in one write); passes and the operator's actions run one at a time;
// a member the rollout did not move has no wish (a hand-set one is dropped when it is taken).
// Hub replicas: an operator's change at any replica is made to the stored rollout (store.ts), and
// every replica takes the others' from the change log (takeStored); the leader's pass writes only
// its planner's record and `from`, and only over the rollout it planned with: one an operator
// changed meanwhile (elsewhere) is taken as stored and planned again at the next pass. A replica
// that does not lead shows the phase a pass would reach now (a dry run), as it runs none.
import { parseLabelSelector } from "../../api/selectors.ts";
import { StatusError } from "../../api/status.ts";
import { jsonEqual } from "../../util/canonical.ts";
import { type Clock, sleepQuietly } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import { Serial } from "../../util/serial.ts";
import { planRollout } from "../deploy/plan.ts";
import type { NodeUpdates } from "../updates/updates.ts";
import {
  type AgentRolloutPhase,
  type AgentRolloutView,
  deviceFacts,
  type MemberObservation,
  moved,
  rolloutView,
  settingsOf,
} from "./observe.ts";
import { type AgentRollout, type AgentRolloutSpec, checkName, freshRecord } from "./spec.ts";
import type { AgentRolloutStore, RolloutChange } from "./store.ts";

export interface AgentRolloutDeps {
  store: AgentRolloutStore;
  /** The nodes that joined and are not revoked, with their labels (the hub's over the device's). */
  nodes(): { name: string; labels: Record<string, string> }[];
  online(node: string): boolean;
  updates: Pick<NodeUpdates, "wantedFor" | "setWishes" | "running" | "lastStatus" | "offeredAt">;
  /** Whether the hub holds a release of `version` (for any arch). */
  hasRelease(version: string): Promise<boolean>;
  /** The wanted release of `node` changed: offer it to its agent. */
  changed(node: string): void;
  clock: Clock;
  log: Logger;
  /** This hub's term as leader (leader.ts), undefined when it does not lead: passes run only in
   * the term the rollouts were made or reloaded in; absent: it always leads. */
  leadTerm?: () => number | undefined;
}

export type PutResult = { code: 200 | 201; view: AgentRolloutView; result: string };

export class AgentRollouts {
  private readonly rollouts = new Map<string, AgentRollout>();
  /** Each rollout's phase as of its last pass. */
  private readonly phases = new Map<string, AgentRolloutPhase>();
  /** Passes and the operator's actions, one at a time. */
  private readonly serial = new Serial();
  /** The leader's term the rollouts were loaded in (leadTerm). */
  private loadedTerm: number | undefined;
  /** Hub replicas: the change log's number of this replica's latest write of each rollout: an
   * older row of another replica is passed over. */
  private readonly rvs = new Map<string, number>();

  /** `loaded`: the store's rollouts (AgentRolloutStore.load). */
  constructor(
    private readonly deps: AgentRolloutDeps,
    loaded: readonly AgentRollout[],
  ) {
    for (const r of loaded) this.rollouts.set(r.name, r);
    this.loadedTerm = deps.leadTerm === undefined ? 0 : deps.leadTerm();
  }

  /** Whether this hub leads in the term its rollouts were loaded in. */
  private leads(): boolean {
    const term = this.deps.leadTerm === undefined ? 0 : this.deps.leadTerm();
    return term !== undefined && term === this.loadedTerm;
  }

  /** The members of every rollout, by rollout name (a node to the latest claim matching it). */
  private membership(): Map<string, string[]> {
    // Without rollouts, no node is a member: the fleet's nodes (every pass, every second) are
    // not listed.
    if (this.rollouts.size === 0) return new Map();
    const order = [...this.rollouts.values()]
      .sort((a, b) => a.record.claimedAt - b.record.claimedAt || a.name.localeCompare(b.name))
      .map((r) => ({ r, matches: parseLabelSelector(r.spec.selector) }));
    const out = new Map<string, string[]>(order.map(({ r }) => [r.name, []]));
    for (const n of this.deps.nodes()) {
      const owner = order.findLast(({ matches }) => matches(n.labels));
      if (owner !== undefined) out.get(owner.r.name)?.push(n.name);
    }
    return out;
  }

  /** The rollout node `node` is a member of, if any. */
  rolloutOf(node: string): string | undefined {
    for (const [name, members] of this.membership()) if (members.includes(node)) return name;
    return undefined;
  }

  /** Whether rollout `name` exists. */
  has(name: string): boolean {
    return this.rollouts.has(name);
  }

  private find(name: string): AgentRollout {
    const r = this.rollouts.get(name);
    if (r === undefined) throw new StatusError("NotFound", `agent rollout "${name}" not found`);
    return r;
  }

  private observe(node: string, version: string): MemberObservation {
    const u = this.deps.updates;
    const running = u.running(node);
    const wanted = u.wantedFor(node)?.version;
    const status = u.lastStatus(node);
    const offeredAt = u.offeredAt(node, version);
    return {
      name: node,
      online: this.deps.online(node),
      ...(running !== undefined && { running }),
      ...(wanted !== undefined && { wanted }),
      ...(status !== undefined && { status }),
      ...(offeredAt !== undefined && { offeredAt }),
    };
  }

  private viewOf(r: AgentRollout, members: readonly string[]): AgentRolloutView {
    const obs = members.map((n) => this.observe(n, r.spec.version));
    const phase = this.leads()
      ? (this.phases.get(r.name) ?? "Rolling")
      : this.phaseOf(structuredClone(r), members, new Map());
    return rolloutView(r, obs, phase);
  }

  /** The view of rollout `name`. */
  view(name: string): AgentRolloutView {
    return this.viewOf(this.find(name), this.membership().get(name) ?? []);
  }

  /** Every rollout's view, by name. */
  list(): AgentRolloutView[] {
    const members = this.membership();
    return [...this.rollouts.values()]
      .sort((a, b) => a.name.localeCompare(b.name))
      .map((r) => this.viewOf(r, members.get(r.name) ?? []));
  }

  /** Refuses (409) a claim of `selector` by rollout `name` that takes a member of a rollout
   * that is not Complete. */
  private checkClaim(name: string, selector: string): void {
    const matches = parseLabelSelector(selector);
    const labels = new Map(this.deps.nodes().map((n) => [n.name, n.labels]));
    for (const [other, members] of this.membership()) {
      const phase = this.phases.get(other);
      if (other === name || phase === "Complete") continue;
      const taken = members.find((n) => matches(labels.get(n) ?? {}));
      if (taken !== undefined)
        throw new StatusError(
          "Conflict",
          `agent rollout "${name}" would take node "${taken}" of agent rollout "${other}", which is not Complete (${phase ?? "not yet run"}): wait for it, change or delete it`,
        );
    }
  }

  /** Creates or changes rollout `name`; stored, and a pass run, before it returns. */
  async put(name: string, spec: AgentRolloutSpec): Promise<PutResult> {
    checkName(name);
    if (!(await this.deps.hasRelease(spec.version)))
      throw new StatusError(
        "NotFound",
        `release ${spec.version} not found: push it first (fleetlet hub release push)`,
      );
    return this.serial.run(() => this.putNow(name, spec));
  }

  private async putNow(name: string, spec: AgentRolloutSpec): Promise<PutResult> {
    const now = this.deps.clock.now();
    let old: AgentRollout | undefined;
    const r = await this.write(name, (stored) => {
      old = stored;
      if (stored !== undefined && jsonEqual(stored.spec, spec)) return undefined;
      const claims =
        stored?.spec.version !== spec.version || stored.spec.selector !== spec.selector;
      if (claims) this.checkClaim(name, spec.selector);
      const record =
        stored === undefined
          ? freshRecord(now)
          : stored.spec.version !== spec.version
            ? freshRecord(now, stored.record.paused)
            : {
                ...stored.record,
                undone: false,
                claimedAt: claims ? now : stored.record.claimedAt,
              };
      return { name, spec, record, created: stored?.created ?? now };
    });
    if (r === old) return { code: 200, view: this.view(name), result: "unchanged" };
    if (old?.spec.version !== spec.version) this.phases.delete(name);
    await this.passNow();
    const result = old === undefined ? "created" : "configured";
    return { code: old === undefined ? 201 : 200, view: this.view(name), result };
  }

  /** Changes rollout `name` in the store as `change` says from what is stored, then holds what
   * is stored after it; gives that. */
  private async write(
    name: string,
    change: RolloutChange,
    byPass = false,
  ): Promise<AgentRollout | undefined> {
    const { stored, rv } = await this.deps.store.change(name, change, byPass);
    if (rv !== undefined) this.rvs.set(name, rv);
    if (stored === undefined) this.rollouts.delete(name);
    else this.rollouts.set(name, stored);
    return stored;
  }

  /** Takes rollout `name` as another replica stored it (null: deleted), numbered `rv` in the
   * change log. */
  takeStored(name: string, r: AgentRollout | null, rv: number): void {
    if ((this.rvs.get(name) ?? 0) >= rv) return;
    this.rvs.delete(name);
    const old = this.rollouts.get(name);
    if (r === null) this.rollouts.delete(name);
    else this.rollouts.set(name, r);
    if (r === null || old?.spec.version !== r.spec.version) this.phases.delete(name);
  }

  /** Deletes rollout `name`; its members keep their wishes. */
  delete(name: string): Promise<AgentRollout> {
    return this.serial.run(async () => {
      let old: AgentRollout | undefined;
      await this.write(name, (stored) => {
        old = stored ?? this.find(name);
        return null;
      });
      this.phases.delete(name);
      return old as AgentRollout;
    });
  }

  /** Pauses, resumes or undoes rollout `name`; stored, and a pass run, before it returns. */
  act(name: string, action: "pause" | "resume" | "undo"): Promise<AgentRolloutView> {
    return this.serial.run(async () => {
      await this.write(name, (stored) => {
        // Not stored: deleted (at another replica, maybe), whatever this one holds.
        if (stored === undefined)
          throw new StatusError("NotFound", `agent rollout "${name}" not found`);
        const r = stored;
        const record =
          action === "undo"
            ? { ...r.record, undone: true }
            : { ...r.record, paused: action === "pause" };
        return { ...r, record };
      });
      await this.passNow();
      return this.view(name);
    });
  }

  /** One pass over every rollout (the loop's iteration), after those running. */
  pass(): Promise<void> {
    return this.serial.run(() => this.passNow());
  }

  /** Loads the store's rollouts (when this replica takes the lead) in place of what it held,
   * then runs a pass. */
  reload(): Promise<void> {
    return this.serial.run(async () => {
      const term = this.deps.leadTerm?.();
      const loaded = await this.deps.store.load();
      this.rollouts.clear();
      this.phases.clear();
      for (const r of loaded) this.rollouts.set(r.name, r);
      this.loadedTerm = term;
      await this.passNow();
    });
  }

  /** Steps every rollout, on the leading replica only. */
  private async passNow(): Promise<void> {
    if (!this.leads()) return;
    const members = this.membership();
    for (const r of [...this.rollouts.values()]) {
      if (!this.leads()) return;
      try {
        await this.step(r, members.get(r.name) ?? []);
      } catch (error) {
        this.deps.log.error("agent rollout pass failed; trying again at the next one", {
          rollout: r.name,
          error: String(error),
        });
      }
    }
  }

  /** Runs a pass now and every `intervalMs` until `signal`. */
  async run(signal: AbortSignal, intervalMs: number): Promise<void> {
    while (!signal.aborted) {
      await this.pass();
      await sleepQuietly(this.deps.clock, intervalMs, signal);
    }
  }

  /** Steps rollout `r`: its record stored when it changed, then the wishes it leads to. */
  private async step(r: AgentRollout, members: readonly string[]): Promise<void> {
    const before = structuredClone(r);
    const wishes = new Map<string, string | null>();
    const phase = this.phaseOf(r, members, wishes);
    const u = this.deps.updates;
    const moves = [...wishes].some(([n, v]) => u.wantedFor(n)?.version !== (v ?? undefined));
    if (!jsonEqual(before.record, r.record) || moves) {
      const stored = await this.write(r.name, (s) => planned(s, before, r), true);
      if (stored?.record !== r.record) return; // changed elsewhere: planned again next pass
    }
    for (const node of await u.setWishes(wishes)) this.deps.changed(node);
    const last = this.phases.get(r.name);
    this.phases.set(r.name, phase);
    if (last !== phase)
      this.deps.log.info("agent rollout", { rollout: r.name, version: r.spec.version, phase });
  }

  /** The phase rollout `r` is in, its record stepped and the wishes it leads to added. */
  private phaseOf(
    r: AgentRollout,
    members: readonly string[],
    wishes: Map<string, string | null>,
  ): AgentRolloutPhase {
    for (const n of members)
      if (!moved(r, n) && this.deps.updates.wantedFor(n) !== undefined) wishes.set(n, null);
    return r.record.undone
      ? this.undo(r, members, wishes)
      : r.record.paused
        ? r.record.planner.failed?.hash === r.spec.version
          ? "Failed"
          : "Paused"
        : this.plan(r, members, wishes);
  }

  /** Sends every member the rollout moved its `from` again. */
  private undo(
    r: AgentRollout,
    members: readonly string[],
    wishes: Map<string, string | null>,
  ): AgentRolloutPhase {
    for (const n of members) if (moved(r, n)) wishes.set(n, r.record.from[n] ?? null);
    return "RolledBack";
  }

  /** Asks the planner, records `from` of the members it moves, and adds their wishes. */
  private plan(
    r: AgentRollout,
    members: readonly string[],
    wishes: Map<string, string | null>,
  ): AgentRolloutPhase {
    const { version } = r.spec;
    const now = this.deps.clock.now();
    const facts = members.map((n) => deviceFacts(r, this.observe(n, version), now));
    const plan = planRollout({
      update: version,
      record: r.record.planner,
      devices: facts,
      settings: settingsOf(r.spec, facts),
      now,
    });
    for (const [n, rev] of plan.assign)
      if (rev === version && !moved(r, n)) r.record.from[n] = this.deps.updates.running(n) ?? null;
    r.record.planner = plan.record;
    for (const [n, rev] of plan.assign)
      wishes.set(n, (rev === version ? version : r.record.from[n]) ?? null);
    // The planner calls a rollout with no member online Rolling; one that was complete stays so.
    const idle = facts.every((d) => !d.online) && plan.record.stableHash === version;
    return plan.phase === "Rolling" && idle ? "Complete" : plan.phase;
  }
}

/** What the pass writes of rollout `r`, planned from `before`, over `stored`: its planner's record
 * and `from`; nothing when the rollout is gone or an operator changed it since `before` (its
 * spec, creation, pause, undo or claim). */
function planned(
  stored: AgentRollout | undefined,
  before: AgentRollout,
  r: AgentRollout,
): AgentRollout | undefined {
  if (stored === undefined) return undefined;
  const mine = (x: AgentRollout) => ({ ...x, record: { ...x.record, planner: null, from: null } });
  if (!jsonEqual(mine(stored), mine(before))) return undefined;
  return r;
}
