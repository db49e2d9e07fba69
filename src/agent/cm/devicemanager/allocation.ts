// Choosing which devices of one resource each container of a pod gets (the kubelet's
// devicesToAllocate). Containers go in order: a regular init container's devices join the pod's
// reuse pool, and every container takes from that pool before it takes free devices; a sidecar or
// app container takes its devices out of the pool for good. When the plugin offers
// GetPreferredAllocation, `prefer` asks it and its answer is checked here; a wrong answer is set
// aside (and reported) for this module's own choice.
// Invariants: no device held by another pod, and no unhealthy device, is ever chosen; a container
// gets exactly the count it asks for, or the pod gets none (a shortage); own choices take the
// lowest ids in code-unit order, so the same input always gives the same devices.
import type { ContainerKind } from "./needs.ts";

/** One container's need for this resource. */
export interface ContainerRequest {
  name: string;
  kind: ContainerKind;
  count: number;
  /** Ids it holds already (allocated before the agent restarted): nothing is chosen for it. */
  held?: readonly string[];
}

export interface ResourceChoiceInput {
  /** Healthy device ids of the resource now. */
  healthy: readonly string[];
  /** Ids other pods hold. */
  heldByOthers: ReadonlySet<string>;
  /** The pod's containers asking for this resource, in allocation order. */
  containers: readonly ContainerRequest[];
}

/** What GetPreferredAllocation is asked for one container. */
export interface PreferredRequest {
  available: string[];
  mustInclude: string[];
  size: number;
}

/** A preferred answer that was not used, and why. */
interface RejectedPreference {
  container: string;
  answer: string[];
  problem: string;
}

export type ResourceChoice =
  /** `ids`: container name → its chosen ids, for each container that held none. */
  | { ok: true; ids: Map<string, string[]>; rejected: RejectedPreference[] }
  /** Not enough devices for `container`: `requested` beyond the reuse pool, `available` free. */
  | { ok: false; container: string; requested: number; available: number };

/** Asks the plugin's preference for one container; a rejection fails the whole choice. */
export type Prefer = (container: string, request: PreferredRequest) => Promise<string[]>;

interface PoolState {
  healthy: Set<string>;
  /** Healthy ids nobody holds, sorted. */
  free: string[];
  /** Ids of the pod's regular init containers not taken for good yet, sorted. */
  reuse: string[];
}

const byCodeUnit = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** Chooses the devices of one resource for a pod's containers. */
export async function chooseDevices(
  input: ResourceChoiceInput,
  prefer?: Prefer,
): Promise<ResourceChoice> {
  const healthy = new Set(input.healthy);
  const ownHeld = new Set(input.containers.flatMap((c) => c.held ?? []));
  const state: PoolState = {
    healthy,
    free: [...healthy]
      .filter((id) => !input.heldByOthers.has(id) && !ownHeld.has(id))
      .sort(byCodeUnit),
    reuse: [],
  };
  const ids = new Map<string, string[]>();
  const rejected: RejectedPreference[] = [];
  for (const c of input.containers) {
    if (c.held !== undefined && c.held.length > 0) {
      take(state, c.held, c.kind);
      continue;
    }
    const chosen = await chooseFor(state, c, prefer, rejected);
    if (!Array.isArray(chosen)) return { ok: false, container: c.name, ...chosen };
    take(state, chosen, c.kind);
    ids.set(c.name, chosen);
  }
  return { ok: true, ids, rejected };
}

async function chooseFor(
  state: PoolState,
  c: ContainerRequest,
  prefer: Prefer | undefined,
  rejected: RejectedPreference[],
): Promise<string[] | { requested: number; available: number }> {
  if (state.reuse.length >= c.count) return state.reuse.slice(0, c.count);
  const remaining = c.count - state.reuse.length;
  if (state.free.length < remaining) return { requested: remaining, available: state.free.length };
  const own = [...state.reuse, ...state.free.slice(0, remaining)];
  if (prefer === undefined) return own;
  const request: PreferredRequest = {
    available: [...state.reuse, ...state.free].sort(byCodeUnit),
    mustInclude: [...state.reuse],
    size: c.count,
  };
  const answer = await prefer(c.name, request);
  const problem = preferredProblem(request, answer);
  if (problem === undefined) return [...answer];
  rejected.push({ container: c.name, answer: [...answer], problem });
  return own;
}

/** Why a preferred answer cannot be used, or undefined when it can. */
function preferredProblem(
  request: PreferredRequest,
  answer: readonly string[],
): string | undefined {
  if (answer.length !== request.size)
    return `it has ${answer.length} devices where ${request.size} were asked`;
  if (new Set(answer).size !== answer.length) return "it names a device twice";
  const available = new Set(request.available);
  const stray = answer.find((id) => !available.has(id));
  if (stray !== undefined) return `device ${JSON.stringify(stray)} is not available`;
  const answered = new Set(answer);
  const missing = request.mustInclude.find((id) => !answered.has(id));
  if (missing !== undefined)
    return `it leaves out device ${JSON.stringify(missing)}, which must be included`;
  return undefined;
}

/** Records that a container of `kind` holds `ids`. */
function take(state: PoolState, ids: readonly string[], kind: ContainerKind): void {
  const taken = new Set(ids);
  state.free = state.free.filter((id) => !taken.has(id));
  if (kind === "init") {
    const pool = new Set(state.reuse);
    for (const id of ids) if (state.healthy.has(id)) pool.add(id);
    state.reuse = [...pool].sort(byCodeUnit);
  } else {
    state.reuse = state.reuse.filter((id) => !taken.has(id));
  }
}
