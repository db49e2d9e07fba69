// The hub's DaemonSets and their revisions (docs/deploy.md, "Objects and their store"): apply
// (create or replace, with uid, generation and resourceVersion as the API server keeps them),
// delete, undo, and the revision list, each written to the store before memory changes and the
// call returns (a write that fails changes nothing). The caller runs one change at a time.
// Invariants: every DaemonSet has a revision for its current template, and that revision has
// the highest number; revision numbers of one DaemonSet are distinct; DaemonSets and revision
// templates are kept defaulted (applyDaemonSetDefaults), those stored before the hub defaulted
// them included. A revision's hash is its name, given when it was made: a template defaulted
// since then keeps it (so its pods keep their uids), and revisions are found by hash or content.
import { randomUUID } from "node:crypto";
import {
  CHANGE_CAUSE_ANNOTATION,
  type ControllerRevision,
  type DaemonSet,
} from "../../api/daemonset.ts";
import {
  applyDaemonSetDefaults,
  applyPodTemplateDefaults,
  DEFAULT_REVISION_HISTORY_LIMIT,
} from "../../api/daemonset-defaults.ts";
import { DEFAULT_NAMESPACE } from "../../api/index.ts";
import { StatusError } from "../../api/status.ts";
import { jsonEqual } from "../../util/canonical.ts";
import { controllerRef, templateHash } from "./pods.ts";
import type { DeployState, DeployStore, RevisionRecord } from "./store.ts";

export type ApplyResult = "created" | "configured" | "unchanged";

function rfc3339(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace(".000Z", "Z");
}

const keyOf = (namespace: string, name: string) => `${namespace}/${name}`;

export class DaemonSetCatalog {
  private resourceVersion: number;
  private readonly byKey = new Map<string, DaemonSet>();
  /** Per DaemonSet uid, its revisions (any order). */
  private readonly revisions = new Map<string, RevisionRecord[]>();

  constructor(
    private readonly store: DeployStore,
    loaded: DeployState,
  ) {
    this.resourceVersion = loaded.resourceVersion;
    for (const o of loaded.objects)
      if (o.kind === "DaemonSet")
        this.byKey.set(
          keyOf(o.namespace, o.name),
          applyDaemonSetDefaults(o.object as unknown as DaemonSet),
        );
    for (const r of loaded.revisions)
      this.revisionsOf(r.dsUid).push({ ...r, template: applyPodTemplateDefaults(r.template) });
  }

  /** The next resourceVersion, shared by every object kind of the hub. */
  nextResourceVersion(): number {
    this.resourceVersion += 1;
    return this.resourceVersion;
  }

  /** `rv` was stored (the store may number past the counter: replicas' shared sequence). */
  usedResourceVersion(rv: number): void {
    this.resourceVersion = Math.max(this.resourceVersion, rv);
  }

  /** Holds DaemonSet `ds` as another replica stored it (null: deleted), with the revision
   * stored with it. Not written back. Gives the DaemonSet it replaced. */
  takeStored(
    namespace: string,
    name: string,
    ds: DaemonSet | null,
    revision?: RevisionRecord,
  ): DaemonSet | undefined {
    const key = keyOf(namespace, name);
    const old = this.byKey.get(key);
    if (ds === null) {
      this.byKey.delete(key);
      if (old !== undefined) this.revisions.delete(old.metadata.uid ?? "");
      return old;
    }
    if (revision !== undefined)
      this.keepRevision({ ...revision, template: applyPodTemplateDefaults(revision.template) });
    this.byKey.set(key, applyDaemonSetDefaults(ds));
    return old;
  }

  /** Keeps the stored revisions this catalog does not hold (read from the store at a replica
   * that does not lead; those it holds are as new). */
  keepMissingRevisions(revisions: readonly RevisionRecord[]): void {
    for (const r of revisions)
      if (this.revision(r.dsUid, r.hash) === undefined)
        this.revisionsOf(r.dsUid).push({ ...r, template: applyPodTemplateDefaults(r.template) });
  }

  /** Forgets a revision another replica (the leader) pruned. */
  dropRevision(dsUid: string, hash: string): void {
    const list = this.revisions.get(dsUid);
    const at = list?.findIndex((r) => r.hash === hash) ?? -1;
    if (at >= 0) list?.splice(at, 1);
  }

  private keepRevision(revision: RevisionRecord): void {
    const list = this.revisionsOf(revision.dsUid);
    const found = list.findIndex((r) => r.hash === revision.hash);
    if (found >= 0) list.splice(found, 1);
    list.push(revision);
  }

  get(namespace: string, name: string): DaemonSet | undefined {
    return this.byKey.get(keyOf(namespace, name));
  }

  /** Every DaemonSet, by namespace then name. */
  list(): DaemonSet[] {
    return [...this.byKey.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([, d]) => d);
  }

  revisionsOf(dsUid: string): RevisionRecord[] {
    let list = this.revisions.get(dsUid);
    if (list === undefined) {
      list = [];
      this.revisions.set(dsUid, list);
    }
    return list;
  }

  /** The kept revision of `template`, if any. */
  private find(dsUid: string, template: DaemonSet["spec"]["template"]): RevisionRecord | undefined {
    const hash = templateHash(template);
    const list = this.revisionsOf(dsUid);
    return list.find((x) => x.hash === hash) ?? list.find((x) => jsonEqual(x.template, template));
  }

  /** The revision of the DaemonSet's current template. */
  current(ds: DaemonSet): RevisionRecord {
    const r = this.find(ds.metadata.uid ?? "", ds.spec.template);
    if (r === undefined) throw new Error(`DaemonSet ${ds.metadata.name} has no current revision`);
    return r;
  }

  /** The revision record of `hash`, if it is kept. */
  revision(dsUid: string, hash: string): RevisionRecord | undefined {
    return this.revisionsOf(dsUid).find((r) => r.hash === hash);
  }

  /** Creates or replaces a validated DaemonSet (defaulted here, if it is not yet). */
  async apply(
    applied: DaemonSet,
    now: number,
  ): Promise<{ result: ApplyResult; daemonSet: DaemonSet }> {
    const input = applyDaemonSetDefaults(applied);
    const namespace = input.metadata.namespace || DEFAULT_NAMESPACE;
    const key = keyOf(namespace, input.metadata.name);
    const old = this.byKey.get(key);
    const specChanged = old === undefined || !jsonEqual(old.spec, input.spec);
    const metaChanged =
      old === undefined ||
      !jsonEqual(old.metadata.labels ?? {}, input.metadata.labels ?? {}) ||
      !jsonEqual(old.metadata.annotations ?? {}, input.metadata.annotations ?? {});
    if (old !== undefined && !specChanged && !metaChanged)
      return { result: "unchanged", daemonSet: old };
    const { labels, annotations } = input.metadata;
    const daemonSet: DaemonSet = {
      apiVersion: "apps/v1",
      kind: "DaemonSet",
      metadata: {
        name: input.metadata.name,
        namespace,
        uid: old?.metadata.uid ?? randomUUID(),
        ...(labels !== undefined && { labels }),
        ...(annotations !== undefined && { annotations }),
        creationTimestamp: old?.metadata.creationTimestamp ?? rfc3339(now),
        generation: (old?.metadata.generation ?? 0) + (specChanged ? 1 : 0),
        resourceVersion: String(this.nextResourceVersion()),
      },
      spec: input.spec,
    };
    const saved = await this.save(daemonSet, this.newRevision(daemonSet, now));
    return { result: old === undefined ? "created" : "configured", daemonSet: saved };
  }

  /** Stores `ds` with its new current revision, if it has one; then holds them. */
  private async save(given: DaemonSet, revision: RevisionRecord | undefined): Promise<DaemonSet> {
    const namespace = given.metadata.namespace ?? DEFAULT_NAMESPACE;
    const rv = await this.store.putObject(
      {
        kind: "DaemonSet",
        namespace,
        name: given.metadata.name,
        object: given as unknown as DaemonSet & Record<string, unknown>,
      },
      Number(given.metadata.resourceVersion),
      revision,
    );
    this.usedResourceVersion(rv);
    const ds = { ...given, metadata: { ...given.metadata, resourceVersion: String(rv) } };
    if (revision !== undefined) this.keepRevision(revision);
    this.byKey.set(keyOf(namespace, ds.metadata.name), ds);
    return ds;
  }

  /** The revision that makes the current template's the newest (a new number, or an old one
   * renumbered), or undefined when it is the newest already. */
  private newRevision(ds: DaemonSet, now: number): RevisionRecord | undefined {
    const uid = ds.metadata.uid ?? "";
    const list = this.revisionsOf(uid);
    const found = this.find(uid, ds.spec.template);
    const hash = found?.hash ?? templateHash(ds.spec.template);
    const max = list.reduce((m, r) => Math.max(m, r.revision), 0);
    const cause = ds.metadata.annotations?.[CHANGE_CAUSE_ANNOTATION];
    if (found !== undefined && found.revision === max) return undefined;
    return {
      dsUid: uid,
      hash,
      revision: max + 1,
      template: ds.spec.template,
      createdAt: found?.createdAt ?? now,
      ...((cause ?? found?.changeCause) !== undefined && {
        changeCause: cause ?? found?.changeCause,
      }),
    };
  }

  /** Drops revisions beyond revisionHistoryLimit that no device runs or is assigned; their
   * hashes, for the caller to write. */
  prune(ds: DaemonSet, inUse: ReadonlySet<string>): string[] {
    const uid = ds.metadata.uid ?? "";
    const limit = ds.spec.revisionHistoryLimit ?? DEFAULT_REVISION_HISTORY_LIMIT;
    const current = this.current(ds).hash;
    const old = this.revisionsOf(uid)
      .filter((r) => r.hash !== current && !inUse.has(r.hash))
      .sort((a, b) => b.revision - a.revision);
    const dropped = old.slice(limit);
    for (const r of dropped) {
      const list = this.revisionsOf(uid);
      list.splice(list.indexOf(r), 1);
    }
    return dropped.map((r) => r.hash);
  }

  async delete(namespace: string, name: string): Promise<DaemonSet | undefined> {
    const key = keyOf(namespace, name);
    const ds = this.byKey.get(key);
    if (ds === undefined) return undefined;
    const uid = ds.metadata.uid ?? "";
    const at = { kind: "DaemonSet", namespace, name };
    this.usedResourceVersion(await this.store.deleteObject(at, this.nextResourceVersion(), uid));
    this.byKey.delete(key);
    this.revisions.delete(uid);
    return ds;
  }

  /**
   * Sets the template back to that of revision `to` (default: the newest before the current
   * one). Returns the DaemonSet and whether it changed (false: it already had that template).
   */
  async undo(namespace: string, name: string, to: number | undefined, now: number) {
    const ds = this.get(namespace, name);
    if (ds === undefined) throw new StatusError("NotFound", `daemonsets.apps "${name}" not found`);
    const list = [...this.revisionsOf(ds.metadata.uid ?? "")].sort(
      (a, b) => b.revision - a.revision,
    );
    const target = to === undefined || to === 0 ? list[1] : list.find((r) => r.revision === to);
    if (target === undefined)
      throw new StatusError(
        "BadRequest",
        to === undefined || to === 0
          ? `no rollout history found for daemonset "${name}": it has no revision before the current one`
          : `unable to find specified revision ${to} in history`,
      );
    if (target.hash === this.current(ds).hash) return { daemonSet: ds, changed: false, target };
    const applied = await this.apply(
      { ...ds, spec: { ...ds.spec, template: target.template } },
      now,
    );
    return { daemonSet: applied.daemonSet, changed: true, target };
  }

  /** The DaemonSet's revisions as ControllerRevisions, oldest first. */
  controllerRevisions(ds: DaemonSet): ControllerRevision[] {
    const uid = ds.metadata.uid ?? "";
    return [...this.revisionsOf(uid)]
      .sort((a, b) => a.revision - b.revision)
      .map((r) => ({
        apiVersion: "apps/v1",
        kind: "ControllerRevision",
        metadata: {
          name: `${ds.metadata.name}-${r.hash}`,
          namespace: ds.metadata.namespace ?? DEFAULT_NAMESPACE,
          labels: { ...ds.spec.template.metadata?.labels, "controller-revision-hash": r.hash },
          ...(r.changeCause !== undefined && {
            annotations: { [CHANGE_CAUSE_ANNOTATION]: r.changeCause },
          }),
          creationTimestamp: rfc3339(r.createdAt),
          ownerReferences: [controllerRef(ds)],
        },
        data: { spec: { template: r.template } },
        revision: r.revision,
      }));
  }
}
