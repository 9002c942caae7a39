// The JWKS cache: usher's public keys, fetched once, kept for the max-age
// usher serves them with, refreshed in the background when stale, and
// fetched again at once when a pass names a kid the set lacks.

import { keysFromJwks } from "./pass.js";

const DEFAULT_MAX_AGE_MS = 300_000; // what usher serves: public, max-age=300

/** maxAgeMs reads Cache-Control's max-age, in milliseconds (null if none). */
export function maxAgeMs(cacheControl) {
  const m = /(?:^|,)\s*max-age\s*=\s*"?(\d+)"?\s*(?:,|$)/i.exec(cacheControl ?? "");
  return m ? Number(m[1]) * 1000 : null;
}

export class KeySet {
  /**
   * @param {object} o
   * @param {() => Promise<{jwks: object, maxAgeMs?: number|null}>} o.load
   *   fetches the JWKS (and its max-age) or throws.
   * @param {() => number} [o.now] the clock, in milliseconds.
   * @param {number} [o.refetchAfterMs] the least time between two fetches
   *   made for an unknown kid, so that passes with made-up kids cannot make
   *   the connector hammer usher (default 10 s).
   * @param {number} [o.maxAgeMs] the longest a set is kept (default and
   *   cap: the JWKS's max-age, else 300 s).
   */
  constructor({ load, now = Date.now, refetchAfterMs = 10_000, maxAgeMs: cap = DEFAULT_MAX_AGE_MS }) {
    this.load = load;
    this.now = now;
    this.refetchAfterMs = refetchAfterMs;
    this.cap = cap;
    this.keys = null; // Map kid → KeyObject, once a fetch succeeded
    this.freshUntil = 0;
    this.fetchedAt = -Infinity; // last fetch attempt, successful or not
    this.inflight = null;
    this.fetches = 0;
    this.lastError = null;
  }

  /** get returns the KeyObject of kid from the set held now, or undefined. */
  get(kid) {
    return this.keys?.get(kid);
  }

  /**
   * ready resolves once a set is held: at once when one is (a stale one
   * starts a refresh in the background and is used meanwhile), else after
   * the first fetch, which rejects when it fails (and so does every call
   * within a second of a failure).
   */
  ready() {
    if (this.keys === null) {
      // Never had one: a failure within the last second is the answer,
      // so that a usher that is down is not asked once per request.
      if (this.inflight === null && this.lastError !== null && this.now() - this.fetchedAt < 1000) {
        return Promise.reject(this.lastError);
      }
      return this.fetch();
    }
    if (this.now() >= this.freshUntil && this.inflight === null) {
      this.fetch().catch(() => {}); // keep serving the stale set; lastError says why
    }
    return Promise.resolve();
  }

  /**
   * refetch fetches the set again for a pass whose kid is unknown, unless
   * one was fetched within refetchAfterMs. It resolves to whether a fetch
   * was made and succeeded; it never rejects.
   */
  async refetch() {
    if (this.inflight !== null) {
      return this.inflight.then(() => true, () => false);
    }
    if (this.now() - this.fetchedAt < this.refetchAfterMs) return false;
    return this.fetch().then(() => true, () => false);
  }

  /** fetch loads the set; concurrent callers share one fetch. */
  fetch() {
    if (this.inflight !== null) return this.inflight;
    this.fetchedAt = this.now();
    this.fetches++;
    this.inflight = (async () => {
      try {
        const { jwks, maxAgeMs: age } = await this.load();
        const keys = keysFromJwks(jwks);
        if (keys.size === 0) throw new Error("usher: the JWKS holds no Ed25519 key");
        this.keys = keys;
        this.freshUntil = this.now() + Math.min(age ?? this.cap, this.cap);
        this.lastError = null;
      } catch (err) {
        this.lastError = err;
        throw err;
      } finally {
        this.inflight = null;
      }
    })();
    return this.inflight;
  }
}
