// The order the agent tries its hub URLs in (docs/protocol.md, "Reconnecting"): rounds, each one
// every URL once in a fresh random order, so that devices given the same list spread over the
// replicas. Within a round a failed connect moves on to the next URL at once; the backoff waits
// only between rounds.

/** `urls` in a random order (Fisher–Yates with `random`, uniform in [0, 1)). */
export function shuffled<T>(urls: readonly T[], random: () => number): T[] {
  const out = [...urls];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.min(i, Math.floor(random() * (i + 1)));
    const a = out[i] as T;
    out[i] = out[j] as T;
    out[j] = a;
  }
  return out;
}

/** How one connection ended, as far as the round cares. */
interface Attempt {
  welcomed: boolean;
  permanent: boolean;
}

/**
 * One round: tries the URLs of `order` one after another until one is welcomed (the session ran
 * and ended), a failure is permanent (the hub refused the credential: the replicas share the
 * store, so every one would), every URL failed, or `signal` is aborted. Returns the last attempt.
 */
export async function runRound<R extends Attempt>(
  order: readonly string[],
  signal: AbortSignal,
  connect: (url: string) => Promise<R>,
  onFailed: (url: string, result: R, next: string) => void,
): Promise<R | undefined> {
  let last: R | undefined;
  for (const [i, url] of order.entries()) {
    if (signal.aborted) break;
    last = await connect(url);
    if (last.welcomed || last.permanent || signal.aborted) break;
    const next = order[i + 1];
    if (next !== undefined) onFailed(url, last, next);
  }
  return last;
}
