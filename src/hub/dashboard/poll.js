// @ts-check
// Reading the operator API from the page: an error that keeps the HTTP status, and a poller that
// asks for one path again when a view redraws, at most every so often, or sooner when the view
// knows the answer changed. An API the hub does not have (404) is remembered and not asked again.

/** The hub answered a status other than 2xx. */
export class HttpError extends Error {
  /**
   * @param {number} status
   * @param {string} path
   */
  constructor(status, path) {
    super(`HTTP ${status} for ${path}`);
    this.status = status;
  }
}

/** @typedef {(path: string) => Promise<any>} Api */
/**
 * How often to ask: at most every `everyMs`, or every `soonMs` once the view knows the answer
 * changed.
 * @typedef {{ everyMs: number, soonMs: number }} Pace
 */

/**
 * @template T
 * @typedef {object} Poller
 * @property {T | undefined} value the last answer
 * @property {boolean} absent the hub answered 404: it has no such API (it is not asked again)
 * @property {string | undefined} error why the last request failed (the value is kept)
 * @property {(now: number, changed?: boolean) => void} refresh asks again when the pace allows;
 *   `changed`: the answer changed, ask within `soonMs` (after the request under way, if any)
 */

/**
 * A poller of `path` at `pace()`; `changed` is called after each answer or failure.
 * @template T
 * @param {Api} api
 * @param {string} path
 * @param {() => Pace} pace
 * @param {() => void} changed
 * @param {() => number} [now] the page's clock
 * @returns {Poller<T>}
 */
export function poller(api, path, pace, changed, now = () => Date.now()) {
  let askedAt = Number.NEGATIVE_INFINITY;
  let busy = false;
  let stale = false;
  /** @type {Poller<T>} */
  const p = {
    value: undefined,
    absent: false,
    error: undefined,
    refresh(at, changedNow = false) {
      stale ||= changedNow;
      if (p.absent || busy) return;
      const { everyMs, soonMs } = pace();
      if (at - askedAt < (stale ? soonMs : everyMs)) return;
      askedAt = at;
      stale = false;
      busy = true;
      api(path)
        .then(
          (v) => {
            p.value = v;
            p.error = undefined;
          },
          (err) => {
            if (err instanceof HttpError && err.status === 404) {
              p.absent = true;
              p.value = undefined;
            } else p.error = /** @type {Error} */ (err).message;
          },
        )
        .finally(() => {
          busy = false;
          if (stale) p.refresh(now());
          changed();
        });
    },
  };
  return p;
}
