// Deep freezing, for values handed to many readers without copies: a reader that tries to change
// one gets a TypeError instead of changing everyone's.

/** Freezes `value` and every object reachable from it; returns it. */
export function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/**
 * `compute` kept per object for frozen arguments: a frozen object (the agent's pods and their
 * parts, see deepFreeze) never changes, so neither does what is computed from it. Other
 * arguments are computed afresh each time.
 */
export function memoizeFrozen<K extends object, V>(compute: (key: K) => V): (key: K) => V {
  const known = new WeakMap<K, V>();
  return (key) => {
    if (!Object.isFrozen(key)) return compute(key);
    let value = known.get(key);
    if (value === undefined) {
      value = compute(key);
      known.set(key, value);
    }
    return value;
  };
}
