// @ts-check
// Reading the operator API from the page: an error that keeps the HTTP status, and a poller that
// asks for one path again when a view redraws, at most every so often, or at once when the view
// knows it changed. An API the hub does not have (404) is remembered and not asked again.

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
 * @template T
 * @typedef {object} Poller
 * @property {T | undefined} value the last answer
 * @property {boolean} absent the hub answered 404: it has no such API (it is not asked again)
 * @property {string | undefined} error why the last request failed (the value is kept)
 * @property {(now: number, force?: boolean) => void} refresh asks again when `everyMs` passed
 *   since the last request, or now with `force` (after the one under way, if any)
 */

/**
 * A poller of `path`; `changed` is called after each answer or failure.
 * @template T
 * @param {Api} api
 * @param {string} path
 * @param {number} everyMs
 * @param {() => void} changed
 * @returns {Poller<T>}
 */
export function poller(api, path, everyMs, changed) {
  let askedAt = Number.NEGATIVE_INFINITY;
  let busy = false;
  let again = false;
  /** @type {Poller<T>} */
  const p = {
    value: undefined,
    absent: false,
    error: undefined,
    refresh(now, force = false) {
      if (p.absent) return;
      if (busy) {
        again ||= force;
        return;
      }
      if (!force && now - askedAt < everyMs) return;
      askedAt = now;
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
          if (again) {
            again = false;
            p.refresh(Date.now(), true);
          }
          changed();
        });
    },
  };
  return p;
}
