// The hub's deployer: keeps each DaemonSet's devices on the revisions its rollout plans, and
// each device's desired state in step with them. One pass (reconcile) observes every DaemonSet,
// plans, stores the new assignments, raises the generations of the devices whose state
// changed, writes them, and only then tells the sessions (through the bus) to send them.
// Invariants: an assignment is stored (or kept to store, deferred-store.ts) before any device is
// sent it; a generation is stored before its message leaves the hub; a revision assigned or
// running is never pruned; passes and operator actions run one at a time, in the order asked.
import type { DaemonSet } from "../../api/daemonset.ts";
import { DEFAULT_NAMESPACE } from "../../api/index.ts";
import { type ConfigObject, objectKeyOf } from "../../api/pod-objects.ts";
import { StatusError } from "../../api/status.ts";
import { type Clock, sleepQuietly } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import { Serial } from "../../util/serial.ts";
import type { Bus } from "../bus.ts";
import { NotLeaderError } from "../leader.ts";
import { type ApplyResult, DaemonSetCatalog } from "./daemonsets.ts";
import { type AssignedPod, DesiredStates, type DesiredWriter } from "./desired.ts";
import { ConfigObjectCatalog } from "./objects.ts";
import type { FleetReader } from "./observe.ts";
import { DesiredRefresh, type RefreshNodes } from "./refresh.ts";
import { RolloutState } from "./rollout-state.ts";
import type { RolloutView } from "./status.ts";
import type { DeployState, DeployStore, PassWrites, ShownStatus, StoredChange } from "./store.ts";

export interface DeployerDeps {
  store: DeployStore;
  loaded: DeployState;
  fleet: FleetReader & DesiredWriter;
  bus: Bus;
  clock: Clock;
  log: Logger;
  /** Writes what is queued in the hub's store now (the devices' generations). */
  flushStore(): Promise<void>;
  /** Period of the pass that advances rollouts on timers (minReadySeconds, deadlines). */
  intervalMs: number;
  /** This hub's term as leader (leader.ts), undefined when it does not lead: passes run only in
   * the term the deployer was made or reloaded in; absent: it always leads. */
  leadTerm?: () => number | undefined;
  /** Sends the device its desired state if its agent is connected here (the sessions). */
  send?(node: string): void;
}

/** The pause before a replica that does not lead reads the store again after a failed read. */
const REFRESH_RETRY_MS = 2000;

export class Deployer {
  /** Replaced only by reload(). */
  catalog: DaemonSetCatalog;
  objects: ConfigObjectCatalog;
  private readonly state: RolloutState;
  /** At a replica that does not lead, while it reads the store for the refresh: what it took
   * of the leader's decisions meanwhile, to take again over what the read gave. */
  private takenDuringLoad: (() => void)[] | undefined;
  private readonly dirtyNodes = new Set<string>();
  readonly desired: DesiredStates;
  private soon: (() => void) | undefined;
  private lastPassMs = 0;
  /** The leader's term the state was loaded in (leadTerm). */
  private loadedTerm: number | undefined;
  /** Passes and operator actions, one at a time. */
  private readonly serial = new Serial();
  /** At a replica that does not lead: reads what the leader stored for the devices held here. */
  private readonly refresh: DesiredRefresh;

  constructor(private readonly deps: DeployerDeps) {
    this.state = new RolloutState({
      fleet: deps.fleet,
      log: deps.log,
      withheld: (node) => deps.fleet.nodes.get(node)?.secretsWithheld === true,
    });
    [this.catalog, this.objects] = this.take(deps.loaded);
    this.desired = new DesiredStates(
      deps.fleet,
      (node) => this.assignedPods(node),
      (key) => this.objects.get(key),
    );
    this.loadedTerm = deps.leadTerm === undefined ? 0 : deps.leadTerm();
    this.refresh = new DesiredRefresh({
      load: () => this.loadForRefresh(),
      take: (loaded, nodes) => this.serial.run(() => this.takeDesired(loaded, nodes)),
      clock: deps.clock,
      log: deps.log,
      retryMs: REFRESH_RETRY_MS,
    });
  }

  /** Takes `loaded` in place of what the deployer held (every device to rebuild); gives the
   * catalogs over it. */
  private take(loaded: DeployState): [DaemonSetCatalog, ConfigObjectCatalog] {
    const catalog = new DaemonSetCatalog(this.deps.store, loaded);
    const objects = new ConfigObjectCatalog(this.deps.store, loaded, {
      next: () => catalog.nextResourceVersion(),
      used: (rv) => catalog.usedResourceVersion(rv),
    });
    this.state.reset(loaded);
    for (const node of this.deps.fleet.nodes.keys()) this.dirtyNodes.add(node);
    return [catalog, objects];
  }

  /** Whether this hub leads in the term its state was loaded in. */
  private leads(): boolean {
    const term = this.deps.leadTerm === undefined ? 0 : this.deps.leadTerm();
    return term !== undefined && term === this.loadedTerm;
  }

  private assignedPods(node: string): AssignedPod[] {
    const out: AssignedPod[] = [];
    for (const ds of this.catalog.list()) {
      const uid = ds.metadata.uid ?? "";
      const hash = this.state.hashOf(uid, node);
      const rev = hash === undefined ? undefined : this.catalog.revision(uid, hash);
      if (hash !== undefined && rev !== undefined) out.push({ ds, hash, template: rev.template });
    }
    return out;
  }

  // ---- operator actions (each stored, then reconciled at once) ----

  apply(input: DaemonSet): Promise<{ result: ApplyResult; daemonSet: DaemonSet }> {
    return this.serial.run(async () => {
      const r = await this.catalog.apply(input, this.deps.clock.now());
      if (r.result !== "unchanged") await this.pass();
      return { result: r.result, daemonSet: this.withStatus(r.daemonSet) };
    });
  }

  delete(namespace: string, name: string): Promise<DaemonSet> {
    return this.serial.run(async () => {
      const ds = await this.catalog.delete(namespace, name);
      if (ds === undefined)
        throw new StatusError("NotFound", `daemonsets.apps "${name}" not found`);
      this.forgetDaemonSet(ds.metadata.uid ?? "");
      await this.pass();
      return ds;
    });
  }

  /** Drops what is held of a deleted DaemonSet; its devices are rebuilt by the next pass. */
  private forgetDaemonSet(uid: string): void {
    for (const node of this.state.forget(uid)) this.dirtyNodes.add(node);
  }

  /** A DaemonSet, ConfigMap or Secret as another replica stored it with resourceVersion `rv`
   * (the change log; `object` null: deleted): held as it is (unless what is held is as new),
   * then reconciled as after an operator's change. */
  takeStored(s: StoredChange): Promise<void> {
    return this.serial.run(async () => {
      const { kind, namespace, name, object, rv } = s;
      if (kind === "DaemonSet") {
        const held = this.catalog.get(namespace, name);
        if (Number(held?.metadata.resourceVersion ?? 0) >= rv) return;
        const old = this.catalog.takeStored(
          namespace,
          name,
          object as DaemonSet | null,
          s.revision,
        );
        this.catalog.usedResourceVersion(rv);
        if (object === null && old !== undefined) this.forgetDaemonSet(old.metadata.uid ?? "");
        await this.pass();
        return;
      }
      const k = kind as ConfigObject["kind"];
      const held = this.objects.get(objectKeyOf(k, namespace, name));
      if (Number(held?.metadata.resourceVersion ?? 0) >= rv) return;
      this.objects.takeStored(k, namespace, name, object as ConfigObject | null);
      this.catalog.usedResourceVersion(rv);
      await this.objectsChanged();
    });
  }

  /** Creates or replaces a validated ConfigMap or Secret; the devices using it get it. */
  applyObject(input: ConfigObject): Promise<{ result: ApplyResult; object: ConfigObject }> {
    return this.serial.run(async () => {
      const r = await this.objects.apply(input, this.deps.clock.now());
      if (r.result !== "unchanged") await this.objectsChanged();
      return r;
    });
  }

  deleteObject(kind: ConfigObject["kind"], namespace: string, name: string) {
    return this.serial.run(async () => {
      const o = await this.objects.delete(kind, namespace, name);
      if (o === undefined)
        throw new StatusError("NotFound", `${kind.toLowerCase()}s "${name}" not found`);
      await this.objectsChanged();
      return o;
    });
  }

  /** Every device with a pod may use a changed object: rebuild them (only real changes count). */
  private objectsChanged(): Promise<void> {
    for (const n of this.state.assignedNodes()) this.dirtyNodes.add(n);
    return this.pass();
  }

  undo(namespace: string, name: string, toRevision: number | undefined) {
    return this.serial.run(async () => {
      const r = await this.catalog.undo(namespace, name, toRevision, this.deps.clock.now());
      if (r.changed) await this.pass();
      return { ...r, daemonSet: this.withStatus(r.daemonSet) };
    });
  }

  get(namespace: string, name: string): DaemonSet | undefined {
    const ds = this.catalog.get(namespace, name);
    return ds === undefined ? undefined : this.withStatus(ds);
  }

  list(namespace?: string): DaemonSet[] {
    return this.catalog
      .list()
      .filter(
        (d) => namespace === undefined || (d.metadata.namespace ?? DEFAULT_NAMESPACE) === namespace,
      )
      .map((d) => this.withStatus(d));
  }

  async rollout(namespace: string, name: string): Promise<RolloutView> {
    const ds = this.catalog.get(namespace, name);
    if (ds === undefined) throw new StatusError("NotFound", `daemonsets.apps "${name}" not found`);
    const uid = ds.metadata.uid ?? "";
    const leads = this.leads();
    const { shown } = this.state;
    if (leads && shown.view(uid) === undefined) await this.reconcile();
    const view = leads
      ? shown.view(uid)
      : this.state.followedViews(this.catalog, this.deps.clock.now()).get(uid);
    if (view === undefined && !leads)
      throw new StatusError(
        "ServiceUnavailable",
        `the rollout of daemonset "${name}" is run by the leading replica, and this one has not seen it yet: ask again or ask another replica`,
      );
    if (view === undefined) throw new Error(`no rollout view of daemonset "${name}"`);
    return view;
  }

  private withStatus(ds: DaemonSet): DaemonSet {
    const status = this.state.shown.status(ds.metadata.uid ?? "");
    return status === undefined ? ds : { ...ds, status };
  }

  // ---- what the leader decided, at a replica that does not lead (the change log) ----

  /** A DaemonSet's status as the leader stored it. */
  takeShown(s: ShownStatus): void {
    if (!this.leads()) this.state.shown.take(s);
  }

  /** A device's assignment as the leader stored it (`hash` null: removed). */
  takeAssignment(dsUid: string, node: string, hash: string | null): void {
    if (this.leads()) return;
    const take = () => this.state.assign(dsUid, node, hash);
    this.takenDuringLoad?.push(take);
    take();
  }

  /** A revision the leader pruned. */
  takePruned(dsUid: string, hash: string): void {
    if (this.leads()) return;
    const take = () => this.catalog.dropRevision(dsUid, hash);
    this.takenDuringLoad?.push(take);
    take();
  }

  /** The store's state for the refresh; the rows taken until it is taken are kept. */
  private async loadForRefresh(): Promise<DeployState> {
    this.takenDuringLoad = [];
    try {
      return await this.deps.store.load();
    } catch (err) {
      this.takenDuringLoad = undefined;
      throw err;
    }
  }

  // ---- what sessions ask ----

  /** The bus told that the leader has `node` sent its new desired state. A replica that does
   * not lead waits for the node's row, whose new generation has it read the store
   * (storedDesired): what it holds of the assignments may be older than the leader's. */
  desiredChanged(node: string): void {
    if (this.leads()) this.deps.send?.(node);
  }

  /** Another replica (the leader) raised the desired generation of `node`, which this replica
   * holds (fleet-replica.ts): read what it stored, then send the device its state. */
  storedDesired(node: string): void {
    this.refresh.ask(node);
  }

  /** Takes the loaded assignments (at a replica that does not lead; no pass, the term it loaded
   * in unchanged) and sends `nodes` their desired state, raised above the generation a welcomed
   * agent runs as desiredFor does. */
  private async takeDesired(loaded: DeployState, nodes: RefreshNodes): Promise<void> {
    if (!this.leads()) {
      this.state.replaceAssignments(loaded.assignments);
      this.catalog.keepMissingRevisions(loaded.revisions);
      // What was taken while the store was read may be newer than what it gave.
      for (const take of this.takenDuringLoad ?? []) take();
    }
    this.takenDuringLoad = undefined;
    const send: string[] = [];
    let raised = false;
    for (const [node, agentGeneration] of nodes) {
      this.desired.forget(node);
      if (agentGeneration !== undefined) {
        if (this.desired.raiseAbove(node, agentGeneration)) raised = true;
        else if (agentGeneration === this.deps.fleet.nodes.get(node)?.desiredGeneration) continue;
      }
      send.push(node);
    }
    if (raised) await this.deps.flushStore();
    for (const node of send) this.deps.send?.(node);
  }

  /**
   * The desired message to send a device now (see AgentSessions' desiredFor); without its
   * Secrets when the connection is not `secure` (then the DaemonSet shows SecretsWithheld).
   */
  desiredFor(
    node: string,
    agentGeneration: number | undefined,
    secure: boolean,
  ): string | undefined {
    const rec = this.deps.fleet.nodes.get(node);
    if (rec === undefined) return undefined;
    if (agentGeneration !== undefined && !this.leads()) {
      // What this replica holds of the assignments may be older than the leader's: read them,
      // then send (or raise) from them.
      this.refresh.ask(node, agentGeneration);
      return undefined;
    }
    if (agentGeneration !== undefined) {
      if (this.desired.raiseAbove(node, agentGeneration)) void this.deps.flushStore();
      else if (agentGeneration === rec.desiredGeneration) return undefined;
    }
    const m = this.desired.message(node, secure);
    const withheld = m?.withheld === true;
    if (this.deps.fleet.setSecretsWithheld(node, withheld) && withheld)
      this.deps.log.warn("Secrets withheld: the device's connection is neither TLS nor loopback", {
        node,
      });
    return m?.text;
  }

  // ---- the loop ----

  /** Asks for a pass soon: after a pause that grows with the cost of the last pass. */
  markDirty(): void {
    if (this.soon !== undefined) return;
    const wait = Math.max(20, Math.min(2000, 20 * this.lastPassMs));
    this.soon = this.deps.clock.setTimer(wait, () => {
      this.soon = undefined;
      void this.safeReconcile();
    });
  }

  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      await sleepQuietly(this.deps.clock, this.deps.intervalMs, signal);
      if (!signal.aborted) await this.safeReconcile();
    }
    this.soon?.();
    this.refresh.stop();
  }

  private async safeReconcile(): Promise<void> {
    try {
      await this.reconcile();
    } catch (error) {
      this.deps.log.error("deploy pass failed; trying again at the next one", { error });
    }
  }

  /** One pass over every DaemonSet (the loop's iteration), after the passes and actions asked
   * before it. */
  reconcile(): Promise<void> {
    return this.serial.run(() => this.pass());
  }

  /** Loads the store's state (when this replica takes the lead) in place of what it held: the
   * rollouts go on from the records and assignments the last leader stored. Then a pass. */
  reload(): Promise<void> {
    return this.serial.run(async () => {
      const term = this.deps.leadTerm?.();
      [this.catalog, this.objects] = this.take(await this.deps.store.load());
      this.loadedTerm = term;
      await this.pass();
    });
  }

  /** One pass (the caller holds the turn), on the leading replica only: plans, writes what it
   * decided (refused when this replica no longer leads), rebuilds and writes the changed
   * devices' states, and only then has them sent. */
  private async pass(): Promise<void> {
    if (!this.leads()) return;
    const started = performance.now();
    const now = this.deps.clock.now();
    const writes: PassWrites = { rollouts: [], assignments: [], pruned: [], statuses: [] };
    const step = {
      ...{ catalog: this.catalog, now, writes },
      changed: (node: string) => this.dirtyNodes.add(node),
      gone: (node: string) => this.desired.forget(node),
    };
    for (const ds of this.catalog.list()) this.state.step(ds, step);
    this.state.endPass();
    try {
      await this.deps.store.writePass(writes);
    } catch (err) {
      if (!(err instanceof NotLeaderError)) throw err;
      this.deps.log.warn("deploy pass not written: this replica no longer leads");
      return;
    }
    const sent: string[] = [];
    for (const node of this.dirtyNodes) {
      const generation = this.desired.rebuild(node);
      if (generation === undefined) continue;
      this.state.noteCarried(node, generation);
      sent.push(node);
    }
    this.dirtyNodes.clear();
    if (sent.length > 0) {
      await this.deps.flushStore();
      for (const node of sent) this.deps.bus.publish({ type: "desired", node });
    }
    this.lastPassMs = performance.now() - started;
  }
}
