// fast-check generators of Kubernetes objects for the property tests of the object parsers
// (test/unit/fuzz) and the hostile-manifest e2e test: valid Pods, ConfigMaps, Secrets and
// DaemonSets as plain JSON (what YAML or JSON decoding gives), near-valid ones (a valid object with
// one field removed, retyped, made huge or given a random value), and hostile manifest texts.
import fc from "fast-check";
import { stringify } from "yaml";

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Obj = { [k: string]: Json };

const lower = "abcdefghijklmnopqrstuvwxyz";
/** A DNS-1123 label of 1..`max` characters. */
const dnsLabel = (max = 12) =>
  fc
    .tuple(
      fc.constantFrom(...lower),
      fc.string({ unit: fc.constantFrom(...`${lower}0123456789-`), maxLength: max - 2 }),
      fc.constantFrom(...`${lower}0123456789`),
    )
    .map(([a, mid, z]) => (max === 1 ? a : `${a}${mid}${z}`));

const labelValue = fc.oneof(
  fc.constant(""),
  fc.stringMatching(/^[A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?$/),
);
const labelKey = fc
  .tuple(fc.option(fc.constantFrom("app.kubernetes.io", "example.com", "fleetlet.io")), dnsLabel(8))
  .map(([prefix, name]) => (prefix === null ? name : `${prefix}/${name}`));
const labels = fc.dictionary(labelKey, labelValue, { maxKeys: 4 });

const quantityPair = fc.constantFrom(
  ["cpu", "100m", "500m"],
  ["cpu", "1", "2"],
  ["memory", "32Mi", "64Mi"],
  ["memory", "1Gi", "1Gi"],
  ["ephemeral-storage", "1G", "2G"],
);

const image = fc.constantFrom("busybox", "busybox:1.36", "registry.local:5000/app@sha256:ab", "x");
const command = fc.array(fc.string({ maxLength: 12 }), { minLength: 1, maxLength: 3 });

const probe = fc.oneof(
  command.map((c) => ({ exec: { command: c } })),
  fc.integer({ min: 1, max: 65535 }).map((port) => ({ httpGet: { path: "/h", port } })),
  fc.integer({ min: 1, max: 65535 }).map((port) => ({ tcpSocket: { port } })),
);

const envVar = fc.oneof(
  fc
    .tuple(fc.stringMatching(/^[A-Z_][A-Z0-9_]{0,8}$/), fc.string({ maxLength: 10 }))
    .map(([name, value]): Obj => ({ name, value })),
  fc
    .tuple(
      fc.stringMatching(/^[A-Z_][A-Z0-9_]{0,8}$/),
      fc.constantFrom("metadata.name", "status.podIP", "spec.nodeName"),
    )
    .map(([name, fieldPath]): Obj => ({ name, valueFrom: { fieldRef: { fieldPath } } })),
);

/** A container named `name`, mounting some of `volumes`. */
function container(name: string, volumes: string[]): fc.Arbitrary<Obj> {
  return fc
    .record(
      {
        image,
        command,
        env: fc.array(envVar, { maxLength: 3 }),
        ports: fc.uniqueArray(fc.integer({ min: 1, max: 65535 }), { maxLength: 2 }),
        resources: fc.uniqueArray(quantityPair, { selector: (p) => p[0], maxLength: 2 }),
        livenessProbe: probe,
        readinessProbe: probe,
        mounts: fc.subarray(volumes),
        imagePullPolicy: fc.constantFrom("Always", "IfNotPresent", "Never"),
      },
      { requiredKeys: ["image"] },
    )
    .map((r) => {
      const c: Obj = { name, image: r.image };
      if (r.command) c.command = r.command;
      if (r.env?.length) c.env = r.env;
      if (r.ports?.length) c.ports = r.ports.map((containerPort) => ({ containerPort }));
      if (r.resources?.length) {
        c.resources = {
          requests: Object.fromEntries(r.resources.map(([k, req]) => [k, req])),
          limits: Object.fromEntries(r.resources.map(([k, , lim]) => [k, lim])),
        };
      }
      if (r.livenessProbe) c.livenessProbe = r.livenessProbe;
      if (r.readinessProbe) c.readinessProbe = r.readinessProbe;
      if (r.mounts?.length)
        c.volumeMounts = r.mounts.map((v) => ({ name: v, mountPath: `/mnt/${v}` }));
      if (r.imagePullPolicy) c.imagePullPolicy = r.imagePullPolicy;
      return c;
    });
}

const volumeSource = fc.oneof(
  fc.constant({ emptyDir: {} }),
  fc.constant({ emptyDir: { medium: "Memory", sizeLimit: "16Mi" } }),
  fc.constant({ hostPath: { path: "/tmp", type: "Directory" } }),
  dnsLabel(8).map((name) => ({ configMap: { name, defaultMode: 0o600 } })),
  dnsLabel(8).map((secretName) => ({ secret: { secretName, optional: true } })),
);

/** Less common PodSpec fields, each present or not. */
const specExtras: fc.Arbitrary<Obj> = fc.record(
  {
    initContainers: fc.constant([
      { name: "init", image: "busybox", command: ["true"] },
      {
        name: "sidecar",
        image: "busybox",
        restartPolicy: "Always",
        startupProbe: { grpc: { port: 9000 }, failureThreshold: 30 },
        lifecycle: { preStop: { sleep: { seconds: 0 } } },
      },
    ]),
    tolerations: fc.constant([
      {
        key: "node.kubernetes.io/unreachable",
        operator: "Exists",
        effect: "NoExecute",
        tolerationSeconds: 30,
      },
      { operator: "Exists" },
      { key: "dedicated", operator: "Equal", value: "cam", effect: "NoSchedule" },
    ]),
    affinity: fc.constant({
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [
            { matchExpressions: [{ key: "arch", operator: "In", values: ["arm64", "amd64"] }] },
            { matchExpressions: [{ key: "mem", operator: "Gt", values: ["512"] }] },
            { matchFields: [{ key: "metadata.name", operator: "In", values: ["dev1"] }] },
          ],
        },
      },
    }),
    dnsPolicy: fc.constantFrom("ClusterFirst", "Default"),
    dnsConfig: fc.constant({
      nameservers: ["10.0.0.10", "fd00::a"],
      searches: ["svc.local."],
      options: [{ name: "ndots", value: "2" }],
    }),
    securityContext: fc.constant({
      runAsUser: 1000,
      runAsGroup: 1000,
      fsGroup: 2000,
      supplementalGroups: [3000],
      sysctls: [{ name: "net.ipv4.ping_group_range", value: "0 1" }],
    }),
    activeDeadlineSeconds: fc.integer({ min: 1, max: 2147483647 }),
    priority: fc.integer(),
    imagePullSecrets: fc.constant([{ name: "regcred" }]),
  },
  { requiredKeys: [] },
);

/** A valid PodSpec (also a DaemonSet's template spec, when `daemon`). */
function podSpec(daemon = false): fc.Arbitrary<Obj> {
  return fc
    .record({
      containerNames: fc.uniqueArray(dnsLabel(10), { minLength: 1, maxLength: 3 }),
      volumes: fc.uniqueArray(fc.tuple(dnsLabel(8), volumeSource), {
        selector: (v) => v[0],
        maxLength: 3,
      }),
      restartPolicy: fc.constantFrom(...(daemon ? ["Always"] : ["Always", "OnFailure", "Never"])),
      hostNetwork: fc.boolean(),
      grace: fc.option(fc.integer({ min: 0, max: 600 })),
      nodeSelector: labels,
      extras: specExtras,
    })
    .chain((r) => {
      const volumeNames = r.volumes.map(([n]) => n);
      return fc
        .tuple(...r.containerNames.map((n) => container(n, volumeNames)))
        .map((containers) => {
          const spec: Obj = { containers, restartPolicy: r.restartPolicy };
          if (r.volumes.length > 0)
            spec.volumes = r.volumes.map(([name, source]) => ({ name, ...source }));
          // Host ports must not clash: with host networking every container port is one.
          if (r.hostNetwork && !hasDuplicatePorts(containers)) spec.hostNetwork = true;
          if (r.grace !== null) spec.terminationGracePeriodSeconds = r.grace;
          if (Object.keys(r.nodeSelector).length > 0) spec.nodeSelector = r.nodeSelector;
          const { activeDeadlineSeconds, ...extras } = r.extras;
          // A DaemonSet's pods may not have a deadline.
          if (!daemon && activeDeadlineSeconds !== undefined)
            spec.activeDeadlineSeconds = activeDeadlineSeconds;
          return { ...spec, ...extras };
        });
    });
}

function hasDuplicatePorts(containers: Obj[]): boolean {
  const ports = containers.flatMap((c) =>
    ((c.ports as Obj[] | undefined) ?? []).map((p) => p.containerPort),
  );
  return new Set(ports).size !== ports.length;
}

const meta = fc
  .record(
    { name: dnsLabel(20), namespace: dnsLabel(10), labels, annotations: labels },
    { requiredKeys: ["name"] },
  )
  .map((m) => m as Obj);

export const validPod: fc.Arbitrary<Obj> = fc
  .tuple(meta, podSpec())
  .map(([metadata, spec]) => ({ apiVersion: "v1", kind: "Pod", metadata, spec }));

const configKey = fc.stringMatching(/^[A-Za-z0-9_-][-._A-Za-z0-9]{0,10}$/);

export const validConfigMap: fc.Arbitrary<Obj> = fc
  .record({
    metadata: meta,
    data: fc.dictionary(configKey, fc.string({ maxLength: 30 }), { maxKeys: 3 }),
    immutable: fc.boolean(),
  })
  .map((r) => ({ apiVersion: "v1", kind: "ConfigMap", ...r }));

export const validSecret: fc.Arbitrary<Obj> = fc
  .record({
    metadata: meta,
    data: fc.dictionary(
      configKey,
      fc.uint8Array({ maxLength: 20 }).map((b) => Buffer.from(b).toString("base64")),
      { maxKeys: 3 },
    ),
    stringData: fc.dictionary(configKey, fc.string({ maxLength: 20 }), { maxKeys: 2 }),
  })
  .map((r) => ({ apiVersion: "v1", kind: "Secret", type: "Opaque", ...r }));

export const validDaemonSet: fc.Arbitrary<Obj> = fc
  .tuple(meta, fc.dictionary(labelKey, labelValue, { minKeys: 1, maxKeys: 3 }), podSpec(true))
  .map(([metadata, match, spec]) => ({
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata,
    spec: {
      selector: { matchLabels: match },
      template: { metadata: { labels: match }, spec },
      updateStrategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 1 } },
    },
  }));

/** Every path to a value inside `v` (object keys and array indexes), the root excluded. */
function pathsOf(v: Json, prefix: (string | number)[] = []): (string | number)[][] {
  if (v === null || typeof v !== "object") return [];
  const entries: [string | number, Json][] = Array.isArray(v)
    ? v.map((x, i) => [i, x])
    : Object.entries(v);
  return entries.flatMap(([k, x]) => [[...prefix, k], ...pathsOf(x, [...prefix, k])]);
}

const HUGE = 50_000;

/** A value that replaces a field: of another type, huge, or anything at all. */
const replacement: fc.Arbitrary<{ kind: "remove" } | { kind: "set"; value: unknown }> = fc.oneof(
  fc.constant({ kind: "remove" as const }),
  fc
    .oneof(
      fc.constantFrom<unknown>(
        null,
        true,
        0,
        -1,
        1.5,
        2 ** 31,
        2 ** 53,
        -(2 ** 63),
        "",
        "x",
        [],
        {},
      ),
      fc.constantFrom<unknown>(
        "A".repeat(HUGE),
        "9".repeat(400),
        Array.from({ length: 2000 }, () => "x"),
        Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`k${i}`, "v"])),
        "1e400",
        "-0",
        "NaN",
        "__proto__",
      ),
      fc.jsonValue({ maxDepth: 3 }),
      fc.string({ maxLength: 20 }),
      fc.integer(),
      fc.double(),
    )
    .map((value) => ({ kind: "set" as const, value })),
);

/** `obj` with the field at `path` removed or set to `value` (a copy; `obj` is untouched). */
function mutateAt(obj: Obj, path: (string | number)[], m: { kind: string; value?: unknown }): Obj {
  const copy = structuredClone(obj);
  let cur: Json = copy;
  for (const seg of path.slice(0, -1)) cur = (cur as Record<string | number, Json>)[seg] as Json;
  const last = path[path.length - 1] as string | number;
  const parent = cur as Record<string | number, unknown>;
  if (m.kind === "remove") {
    if (Array.isArray(parent)) parent.splice(last as number, 1);
    else delete parent[last];
  } else parent[last] = m.value;
  return copy;
}

/** A valid object from `valid` with one to three fields each removed, retyped, made huge or
 * given a random value. */
export function nearValid(valid: fc.Arbitrary<Obj>): fc.Arbitrary<Obj> {
  const step = fc.tuple(fc.nat(), replacement);
  return fc.tuple(valid, fc.array(step, { minLength: 1, maxLength: 3 })).map(([obj, steps]) => {
    let out = obj;
    for (const [pick, m] of steps) {
      const paths = pathsOf(out);
      if (paths.length === 0) break;
      out = mutateAt(out, paths[pick % paths.length] as (string | number)[], m);
    }
    return out;
  });
}

/** How an object is written into a manifest: block YAML, flow YAML or JSON. */
export const writeAs = fc.constantFrom("yaml", "flow", "json");

export function writeObject(obj: unknown, as: string): string {
  if (as === "json") return `${JSON.stringify(obj, null, 1)}\n`;
  return stringify(obj, as === "flow" ? { collectionStyle: "flow", lineWidth: 0 } : {});
}

/** YAML texts that try to exhaust the parser: alias bombs, self-referencing aliases, deep
 * nesting, long scalars, odd tags and directives. */
export const hostileYaml: fc.Arbitrary<string> = fc.oneof(
  fc.integer({ min: 2, max: 12 }).map((levels) => {
    const lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x","x"]'];
    for (let i = 1; i < levels; i++)
      lines.push(
        `a${i}: &a${i} [${Array(10)
          .fill(`*a${i - 1}`)
          .join(",")}]`,
      );
    return `${lines.join("\n")}\n`;
  }),
  fc.constantFrom(
    "a: &a [*a]\n",
    "a: &a {b: *a}\n",
    "apiVersion: v1\nkind: Pod\nmetadata: &m {name: x, labels: *m}\nspec: {containers: [{name: c, image: i}]}\n",
    "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: &s {containers: [{name: c, image: i, command: *s}]}\n",
    "%YAML 1.1\n---\na: !!binary aGVsbG8=\n",
    "%TAG ! tag:evil.com,2000:\n---\n!foo {a: 1}\n",
    "a: !!js/function 'function(){}'\n",
    "? [a, b]\n: c\n",
    "<<: *undefined\n",
    "--- !!set\n? a\n? b\n",
    "a: 0x1F\nb: 0o17\nc: .inf\nd: -.nan\ne: 1_000\n",
  ),
  fc.integer({ min: 10, max: 3000 }).map((n) => `${"[".repeat(n)}${"]".repeat(n)}\n`),
  fc.integer({ min: 10, max: 3000 }).map((n) => `${"{a: ".repeat(n)}1${"}".repeat(n)}\n`),
  fc
    .integer({ min: 10, max: 600 })
    .map((n) => `${Array.from({ length: n }, (_, i) => `${" ".repeat(i)}a:`).join("\n")} 1\n`),
  fc.integer({ min: 1, max: 300 }).map((n) => "---\n".repeat(n)),
  fc.integer({ min: 1000, max: 300_000 }).map((n) => `a: ${"b".repeat(n)}\n`),
  fc.integer({ min: 1000, max: 300_000 }).map((n) => `${"k".repeat(n)}: 1\n`),
);

/** Text a writer could leave in a manifest folder: bytes, tokens of YAML, or hostile YAML. */
export const arbitraryText: fc.Arbitrary<string> = fc.oneof(
  fc.string({ maxLength: 200 }),
  fc.string({ unit: "binary", maxLength: 200 }),
  fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b).toString("utf8")),
  fc
    .array(
      fc.constantFrom(
        ...["apiVersion: v1\n", "kind: Pod\n", "metadata:\n", "  name: x\n", "spec:\n"],
        ...["  containers:\n", "  - name: c\n", "    image: i\n", "---\n", "- ", ": ", "{", "}"],
        ...["[", "]", "&a ", "*a", "!!str ", "? ", "|\n", ">-\n", "#", "'", '"', "\t", "\n"],
      ),
      { maxLength: 40 },
    )
    .map((parts) => parts.join("")),
  hostileYaml,
);

export type { Obj };
