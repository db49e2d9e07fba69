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
