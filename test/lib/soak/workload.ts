// What a soak asks of the device, and the model of what it should run: manifest files (their
// last valid version, and whether the running agent has seen it) and DaemonSets on the hub.
// Each pod carries a `soak-gen` label naming the version the model expects.

/** How a pod behaves, and so which restarts of it have a reason. */
export type PodKind = "steady" | "readyflap" | "crashloop" | "liveflap";

export const POD_KINDS: PodKind[] = ["steady", "readyflap", "crashloop", "liveflap"];

/** Kinds whose containers restart by their restart policy or a probe; the others never may. */
export function mayRestart(kind: PodKind): boolean {
  return kind === "crashloop" || kind === "liveflap";
}

const TOGGLE = "while true; do touch /ok; sleep 6; rm -f /ok; sleep 3; done";

function container(kind: PodKind, image: string, gen: number): string {
  const command: Record<PodKind, string> = {
    steady: "sleep 100000",
    readyflap: TOGGLE,
    crashloop: "sleep 2; exit 3",
    liveflap: TOGGLE,
  };
  const probe = (which: string) =>
    `      ${which}:\n        exec:\n          command: ["test", "-f", "/ok"]\n` +
    "        periodSeconds: 1\n        failureThreshold: 2\n";
  return (
    `    - name: main\n      image: ${image}\n` +
    `      command: ["sh", "-c", ${JSON.stringify(command[kind])}]\n` +
    `      env:\n        - name: SOAK_GEN\n          value: "${gen}"\n` +
    (kind === "readyflap" ? probe("readinessProbe") : "") +
    (kind === "liveflap" ? probe("livenessProbe") : "")
  );
}

/** A static pod manifest of `kind`, version `gen`. */
export function podManifest(name: string, kind: PodKind, image: string, gen: number): string {
  return (
    `apiVersion: v1\nkind: Pod\nmetadata:\n  name: ${name}\n` +
    `  labels:\n    soak-kind: ${kind}\n    soak-gen: "${gen}"\n` +
    "spec:\n  terminationGracePeriodSeconds: 1\n  restartPolicy: Always\n  containers:\n" +
    container(kind, image, gen)
  );
}

/** A DaemonSet for every soak node (nodeSelector soak=yes), version `gen`. */
export function daemonSetManifest(name: string, image: string, gen: number): string {
  return (
    `apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: ${name}\nspec:\n` +
    `  selector:\n    matchLabels:\n      app: ${name}\n` +
    "  updateStrategy:\n    rollingUpdate:\n      maxUnavailable: 1\n" +
    `  template:\n    metadata:\n      labels:\n        app: ${name}\n        soak-kind: steady\n` +
    `        soak-gen: "${gen}"\n` +
    '    spec:\n      terminationGracePeriodSeconds: 1\n      nodeSelector:\n        soak: "yes"\n' +
    "      containers:\n" +
    container("steady", image, gen).replace(/^/gm, "    ")
  );
}

/** Edits a valid manifest into an invalid one, in one of the ways users and crashes do. */
export function invalidEdits(valid: string): string[] {
  return [
    `${valid.slice(0, Math.floor(valid.length / 2))}`, // cut: no final newline
    valid.replace("containers:", "containers: 5"), // wrong type
    valid.replace(/image: \S+/, "image: ''"), // fails validation
    `${valid}\0`, // NUL byte: taken as not completely written
    "", // truncated by a writer
    `${valid}  bogus: [unclosed\n`, // bad YAML
  ];
}

/** One manifest file the soak manages. */
export interface ManagedFile {
  file: string;
  /** The pod's name in the manifest (the agent adds "-<node>"). */
  name: string;
  kind: PodKind;
  /** The version of its last valid content. */
  gen: number;
  /** Whether the file holds that valid content now (false: an invalid edit is on disk). */
  valid: boolean;
  /** Whether the running agent has shown the pod at `gen` since it last started. */
  seen: boolean;
  /** Whether `gen` is surely the agent's saved last valid version (shown at a quiet period's
   * end, with the disk not full since): only then does an invalid edit keep it, across agent
   * restarts too (the agent saves last valid versions in <rootDir>/state/manifests, and a full
   * disk may leave an older one there). */
  durable: boolean;
}

/** One DaemonSet the soak manages on the hub. */
export interface ManagedDaemonSet {
  name: string;
  gen: number;
}

/** A wanted pod: its name on the device, the version expected, and its kind. */
export interface WantedPod {
  fullName: string;
  gen: number;
  kind: PodKind;
}

/** The model: the files and DaemonSets the soak made, and so the pods the device should run. */
export class Model {
  readonly files = new Map<string, ManagedFile>();
  readonly daemonSets = new Map<string, ManagedDaemonSet>();
  private nextGen = 1;

  gen(): number {
    return this.nextGen++;
  }

  /** The pods the device should run now, by full name. */
  wanted(nodeName: string): Map<string, WantedPod> {
    const out = new Map<string, WantedPod>();
    for (const f of this.files.values()) {
      if (!f.valid && !f.durable) continue;
      const fullName = `${f.name}-${nodeName}`;
      out.set(fullName, { fullName, gen: f.gen, kind: f.kind });
    }
    for (const d of this.daemonSets.values()) {
      const fullName = `${d.name}-${nodeName}`;
      out.set(fullName, { fullName, gen: d.gen, kind: "steady" });
    }
    return out;
  }

  /** The agent started again: what it showed before is forgotten (what it saved is not). */
  agentRestarted(): void {
    for (const f of this.files.values()) f.seen = false;
  }
}
