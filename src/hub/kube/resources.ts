// The resources the hub serves at Kubernetes' paths (docs/kubectl.md): what kubectl needs to
// know of each (group, kind, scope, verbs, short names, subresources) for discovery, how to read
// them (list, get, the fields they are selected by, their table), and where their changes come
// from for watches. Writes are in writes.ts.
import {
  type Cell,
  type Column,
  configMapTable,
  controllerRevisionTable,
  daemonSetTable,
  eventTable,
  leaseTable,
  nodeTable,
  podTable,
  secretTable,
  type TableKind,
} from "../../api/columns.ts";
import type { ControllerRevision, DaemonSet } from "../../api/daemonset.ts";
import type { Lease, Node } from "../../api/node.ts";
import { eventFields, type FieldSet, podFields } from "../../api/selectors.ts";
import type { ConfigMap, Event, ObjectMeta, Pod, Secret } from "../../api/types.ts";
import type { Deployer } from "../deploy/deployer.ts";
import type { Fleet } from "../fleet.ts";
import { leaseView, NODE_LEASE_NAMESPACE } from "../views.ts";

/** Any object the hub serves. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
}

interface Subresource {
  name: string;
  kind: string;
  verbs: string[];
}

export interface KubeResource {
  /** Plural, as in the URL: "pods". */
  name: string;
  singular: string;
  kind: string;
  /** "" for the core group. */
  group: string;
  namespaced: boolean;
  verbs: string[];
  shortNames?: string[];
  categories?: string[];
  subresources?: Subresource[];
  /** Every object, in `namespace` when given. */
  list(namespace?: string): KubeObject[];
  get(namespace: string, name: string): KubeObject | undefined;
  fields: FieldSet<KubeObject>;
  table: { columns: Column[]; cells(o: KubeObject, now: number): Cell[] };
  /** "changes": the hub's change log tells its changes; "poll": its watch compares lists. */
  changes: "changes" | "poll";
}

const metaFields = <T extends KubeObject>(): FieldSet<T> => ({
  "metadata.name": (o) => o.metadata.name,
  "metadata.namespace": (o) => o.metadata.namespace ?? "default",
});

function table<T>(t: TableKind<T>): KubeResource["table"] {
  return t as unknown as KubeResource["table"];
}

const READ = ["get", "list", "watch"];
const WRITE = ["create", "delete", "get", "list", "patch", "update", "watch"];

export interface ResourceDeps {
  fleet: Pick<Fleet, "nodes" | "view" | "allPods" | "allEvents" | "lastSeen">;
  deployer: Pick<Deployer, "list" | "get" | "objects" | "catalog">;
}

function inNamespace<T extends KubeObject>(items: T[], namespace?: string): T[] {
  return namespace === undefined
    ? items
    : items.filter((o) => (o.metadata.namespace ?? "default") === namespace);
}

function nodes(d: ResourceDeps): KubeResource {
  return {
    name: "nodes",
    singular: "node",
    kind: "Node",
    group: "",
    namespaced: false,
    verbs: ["delete", "get", "list", "patch", "watch"],
    shortNames: ["no"],
    list: () => [...d.fleet.nodes.keys()].sort().flatMap((n) => d.fleet.view(n) ?? []) as Node[],
    get: (_ns, name) => d.fleet.view(name),
    fields: { "metadata.name": (o) => o.metadata.name },
    table: table<Node>(nodeTable),
    changes: "changes",
  };
}

function pods(d: ResourceDeps): KubeResource {
  const list = (ns?: string) => inNamespace(d.fleet.allPods().map((p) => p.pod) as Pod[], ns);
  return {
    name: "pods",
    singular: "pod",
    kind: "Pod",
    group: "",
    namespaced: true,
    verbs: READ,
    shortNames: ["po"],
    categories: ["all"],
    subresources: [
      { name: "log", kind: "Pod", verbs: ["get"] },
      { name: "exec", kind: "PodExecOptions", verbs: ["create", "get"] },
      { name: "attach", kind: "PodAttachOptions", verbs: ["create", "get"] },
      { name: "portforward", kind: "PodPortForwardOptions", verbs: ["create", "get"] },
    ],
    list,
    get: (ns, name) => list(ns).find((p) => p.metadata.name === name),
    fields: podFields as unknown as FieldSet<KubeObject>,
    table: table<Pod>(podTable),
    changes: "changes",
  };
}

function events(d: ResourceDeps): KubeResource {
  const list = (ns?: string) =>
    inNamespace(d.fleet.allEvents().map((e) => e.event) as Event[], ns).sort((a, b) =>
      a.lastTimestamp.localeCompare(b.lastTimestamp),
    );
  return {
    name: "events",
    singular: "event",
    kind: "Event",
    group: "",
    namespaced: true,
    verbs: READ,
    shortNames: ["ev"],
    list,
    get: (ns, name) => list(ns).find((e) => e.metadata.name === name),
    fields: eventFields as unknown as FieldSet<KubeObject>,
    table: table<Event>(eventTable),
    changes: "changes",
  };
}

/** The devices' Leases (kube-node-lease), renewed by their messages to the hub. */
function leases(d: ResourceDeps): KubeResource {
  const list = (ns?: string) =>
    ns !== undefined && ns !== NODE_LEASE_NAMESPACE
      ? []
      : [...d.fleet.nodes.values()]
          .sort((a, b) => a.name.localeCompare(b.name))
          .flatMap((rec) => leaseView(rec, d.fleet.lastSeen(rec.name)) ?? []);
  return {
    name: "leases",
    singular: "lease",
    kind: "Lease",
    group: "coordination.k8s.io",
    namespaced: true,
    verbs: READ,
    list,
    get: (ns, name) => list(ns).find((l) => l.metadata.name === name),
    fields: metaFields(),
    table: table<Lease>(leaseTable),
    changes: "poll",
  };
}

/** ConfigMaps or Secrets: the hub's own, kept by the deployer. */
function configObjects(d: ResourceDeps, kind: "ConfigMap" | "Secret"): KubeResource {
  const secret = kind === "Secret";
  return {
    name: secret ? "secrets" : "configmaps",
    singular: secret ? "secret" : "configmap",
    kind,
    group: "",
    namespaced: true,
    verbs: WRITE,
    ...(!secret && { shortNames: ["cm"] }),
    list: (ns) => d.deployer.objects.list(kind, ns) as KubeObject[],
    get: (ns, name) => d.deployer.objects.get(`${kind}/${ns}/${name}`) as KubeObject | undefined,
    fields: secret
      ? { ...metaFields(), type: (o) => (o as unknown as Secret).type ?? "Opaque" }
      : metaFields(),
    table: secret ? table<Secret>(secretTable) : table<ConfigMap>(configMapTable),
    changes: "poll",
  };
}

function coreResources(d: ResourceDeps): KubeResource[] {
  return [nodes(d), pods(d), events(d), configObjects(d, "ConfigMap"), configObjects(d, "Secret")];
}

function appsResources(d: ResourceDeps): KubeResource[] {
  const revisions = (ns?: string) =>
    d.deployer
      .list(ns)
      .flatMap((ds) => d.deployer.catalog.controllerRevisions(ds)) as ControllerRevision[];
  return [
    {
      name: "daemonsets",
      singular: "daemonset",
      kind: "DaemonSet",
      group: "apps",
      namespaced: true,
      verbs: WRITE,
      shortNames: ["ds"],
      categories: ["all"],
      list: (ns) => d.deployer.list(ns),
      get: (ns, name) => d.deployer.get(ns, name),
      fields: metaFields<DaemonSet>() as unknown as FieldSet<KubeObject>,
      table: table<DaemonSet>(daemonSetTable),
      changes: "poll",
    },
    {
      name: "controllerrevisions",
      singular: "controllerrevision",
      kind: "ControllerRevision",
      group: "apps",
      namespaced: true,
      verbs: ["get", "list", "watch"],
      list: revisions,
      get: (ns, name) => revisions(ns).find((r) => r.metadata.name === name),
      fields: metaFields(),
      table: table<ControllerRevision>(controllerRevisionTable),
      changes: "poll",
    },
  ];
}

/** Every resource the hub serves, by group then name. */
export function hubResources(d: ResourceDeps): KubeResource[] {
  return [...coreResources(d), ...appsResources(d), leases(d)];
}

/** The resource of `group` named `name` (plural), or undefined. */
export function findResource(
  all: KubeResource[],
  group: string,
  name: string,
): KubeResource | undefined {
  return all.find((r) => r.group === group && r.name === name);
}

/** "daemonsets.apps", "pods": the resource as the API server names it in messages. */
export function qualifiedName(r: KubeResource): string {
  return r.group === "" ? r.name : `${r.name}.${r.group}`;
}
