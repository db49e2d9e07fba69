// The ConfigMaps and Secrets operators applied to the hub, which it sends to the devices whose
// pods reference them (docs/deploy.md, "ConfigMaps and Secrets"). Validated as the API server
// does (src/api/validate-objects.ts) by the caller; an immutable object may not change. Written
// to the store before memory changes and the call returns; the caller runs one change at a time.
import { randomUUID } from "node:crypto";
import { formatInvalidObject } from "../../api/index.ts";
import { type ConfigObject, objectKey, objectKeyOf } from "../../api/pod-objects.ts";
import { StatusError } from "../../api/status.ts";
import { validateImmutableUpdate } from "../../api/validate-objects.ts";
import { jsonEqual } from "../../util/canonical.ts";
import type { ApplyResult } from "./daemonsets.ts";
import type { DeployState, DeployStore } from "./store.ts";

function rfc3339(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace(".000Z", "Z");
}

/** What makes two versions of an object differ (not its uid, times or resourceVersion). */
function content(o: ConfigObject): unknown {
  const { uid: _u, creationTimestamp: _c, resourceVersion: _r, ...meta } = o.metadata;
  return { ...o, metadata: meta };
}

export class ConfigObjectCatalog {
  private readonly byKey = new Map<string, ConfigObject>();

  constructor(
    private readonly store: DeployStore,
    loaded: DeployState,
    private readonly versions: { next(): number; used(rv: number): void },
  ) {
    for (const o of loaded.objects)
      if (o.kind === "ConfigMap" || o.kind === "Secret")
        this.byKey.set(
          objectKeyOf(o.kind, o.namespace, o.name),
          o.object as unknown as ConfigObject,
        );
  }

  /** The object of `key` (objectKeyOf), if the hub has it. */
  get(key: string): ConfigObject | undefined {
    return this.byKey.get(key);
  }

  /** Every object of `kind`, in `namespace` when given, by namespace then name. */
  list(kind: ConfigObject["kind"], namespace?: string): ConfigObject[] {
    return [...this.byKey.entries()]
      .filter(
        ([, o]) =>
          o.kind === kind && (namespace === undefined || o.metadata.namespace === namespace),
      )
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([, o]) => o);
  }

  /** Creates or replaces a validated object (its namespace set). */
  async apply(
    input: ConfigObject,
    now: number,
  ): Promise<{ result: ApplyResult; object: ConfigObject }> {
    const key = objectKey(input);
    const old = this.byKey.get(key);
    if (old !== undefined) {
      const errors = validateImmutableUpdate(old, input);
      if (errors.length > 0)
        throw new StatusError(
          "Invalid",
          formatInvalidObject(input.kind, input.metadata.name, errors),
        );
      if (jsonEqual(content(old), content(input))) return { result: "unchanged", object: old };
    }
    const object = {
      ...input,
      metadata: {
        ...input.metadata,
        uid: old?.metadata.uid ?? randomUUID(),
        creationTimestamp: old?.metadata.creationTimestamp ?? rfc3339(now),
        resourceVersion: String(this.versions.next()),
      },
    } as ConfigObject;
    const rv = await this.store.putObject(
      {
        kind: object.kind,
        namespace: object.metadata.namespace ?? "default",
        name: object.metadata.name,
        object: object as unknown as ConfigObject & Record<string, unknown>,
      },
      Number(object.metadata.resourceVersion),
    );
    this.versions.used(rv);
    object.metadata.resourceVersion = String(rv);
    this.byKey.set(key, object);
    return { result: old === undefined ? "created" : "configured", object };
  }

  async delete(
    kind: ConfigObject["kind"],
    namespace: string,
    name: string,
  ): Promise<ConfigObject | undefined> {
    const key = objectKeyOf(kind, namespace, name);
    const old = this.byKey.get(key);
    if (old === undefined) return undefined;
    this.versions.used(
      await this.store.deleteObject({ kind, namespace, name }, this.versions.next()),
    );
    this.byKey.delete(key);
    return old;
  }

  /** Holds `object` as another replica stored it (null: deleted); not written back. Gives
   * the object it replaced. */
  takeStored(
    kind: ConfigObject["kind"],
    namespace: string,
    name: string,
    object: ConfigObject | null,
  ): ConfigObject | undefined {
    const key = objectKeyOf(kind, namespace, name);
    const old = this.byKey.get(key);
    if (object === null) this.byKey.delete(key);
    else this.byKey.set(key, object);
    return old;
  }
}
