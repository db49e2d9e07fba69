// The agent rollouts of the hub (docs/hub-releases.md, "Rolling a release out to a fleet"): a
// periodic pass that, for each rollout, computes its members, asks the DaemonSet planner
// (deploy/plan.ts) over the revisions `version` and PREVIOUS, and carries out its assignments by
// setting each member's wanted release (updates/updates.ts), the member's `from` stored first.
//
// Invariants: a node is a member of one rollout at most (of the rollouts whose selector matches
// it, the one that claimed last); the record is stored before the wishes it leads to are set
// (a step's wishes in one write); passes and the operator's actions run one at a time;
// a member the rollout did not move has no wish (a hand-set one is dropped when it is taken).
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
import type { AgentRolloutStore } from "./store.ts";

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
    return rolloutView(r, obs, this.phases.get(r.name) ?? "Rolling");
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
    const old = this.rollouts.get(name);
    if (old !== undefined && jsonEqual(old.spec, spec))
      return { code: 200, view: this.view(name), result: "unchanged" };
    const now = this.deps.clock.now();
    const claims = old?.spec.version !== spec.version || old.spec.selector !== spec.selector;
    if (claims) this.checkClaim(name, spec.selector);
    const record =
      old === undefined
        ? freshRecord(now)
        : old.spec.version !== spec.version
          ? freshRecord(now, old.record.paused)
          : { ...old.record, undone: false, claimedAt: claims ? now : old.record.claimedAt };
    const r: AgentRollout = { name, spec, record, created: old?.created ?? now };
    await this.deps.store.save(r);
    this.rollouts.set(name, r);
    if (old?.spec.version !== spec.version) this.phases.delete(name);
    await this.passNow();
    const result = old === undefined ? "created" : "configured";
    return { code: old === undefined ? 201 : 200, view: this.view(name), result };
  }

  /** Deletes rollout `name`; its members keep their wishes. */
  delete(name: string): Promise<AgentRollout> {
    return this.serial.run(async () => {
      const r = this.find(name);
      await this.deps.store.delete(name);
      this.rollouts.delete(name);
      this.phases.delete(name);
      return r;
    });
  }

  /** Pauses, resumes or undoes rollout `name`; stored, and a pass run, before it returns. */
  act(name: string, action: "pause" | "resume" | "undo"): Promise<AgentRolloutView> {
    return this.serial.run(async () => {
      const r = this.find(name);
      const record =
        action === "undo"
          ? { ...r.record, undone: true }
          : { ...r.record, paused: action === "pause" };
      const next = { ...r, record };
      await this.deps.store.save(next);
      this.rollouts.set(name, next);
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
    const before = structuredClone(r.record);
    const wishes = new Map<string, string | null>();
    for (const n of members)
      if (!moved(r, n) && this.deps.updates.wantedFor(n) !== undefined) wishes.set(n, null);
    const phase = r.record.undone
      ? this.undo(r, members, wishes)
      : r.record.paused
        ? r.record.planner.failed?.hash === r.spec.version
          ? "Failed"
          : "Paused"
        : this.plan(r, members, wishes);
    if (!jsonEqual(before, r.record)) await this.deps.store.save(r, true);
    for (const node of await this.deps.updates.setWishes(wishes)) this.deps.changed(node);
    const last = this.phases.get(r.name);
    this.phases.set(r.name, phase);
    if (last !== phase)
      this.deps.log.info("agent rollout", { rollout: r.name, version: r.spec.version, phase });
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
