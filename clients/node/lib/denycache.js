"use strict";
// The deny cache: after a refusal with retry_after r, the same (key,
// quantity) is refused locally until min(r, maxMs) passes, with fields
// computed from the cached reply and the time passed. It only ever
// refuses, never admits, so it cannot let through what the server would
// refuse; maxMs bounds how long an operator who resets or overrides a key
// waits to be obeyed.
const { Decision } = require("./decision");

/** DEFAULT_DENY_CACHE_MS is the longest a refusal is reused: 1 s. */
const DEFAULT_DENY_CACHE_MS = 1000;
/** DEFAULT_DENY_CACHE_SIZE bounds the entries; the oldest go first. */
const DEFAULT_DENY_CACHE_SIZE = 10000;

class DenyCache {
  /**
   * @param {number} maxMs the longest an entry lives, > 0
   * @param {number} size the most entries, >= 1
   * @param {() => number} now a monotonic clock in ms
   */
  constructor(maxMs, size, now) {
    this.maxMs = maxMs;
    this.size = size;
    this.now = now;
    this.entries = new Map(); // "<n>\0<key>" → {at, until, decision}; insertion order is age
  }

  /**
   * get returns the refusal cached for (key, n), aged by the time passed
   * since it was decided, or null.
   */
  get(key, n) {
    const id = `${n}\0${key}`;
    const e = this.entries.get(id);
    if (e === undefined) return null;
    const now = this.now();
    if (now >= e.until) {
      this.entries.delete(id);
      return null;
    }
    const elapsed = now - e.at;
    const age = (ms) => Math.max(0, Math.ceil(ms - elapsed)); // whole ms, never early
    const results = e.decision.results.map((r) => ({
      ...r,
      // A refusing policy still refuses: its wait never reaches 0 before
      // the entry expires (until <= at + retry_after).
      retryAfterMs: r.retryAfterMs < 0 ? -1 : age(r.retryAfterMs),
      resetAfterMs: age(r.resetAfterMs),
    }));
    return new Decision(false, results, true);
  }

  /** put caches a refused decision for (key, n). */
  put(key, n, d) {
    if (d.allowed) return;
    const wait = d.retryAfterMs(); // null: one policy never allows it
    const ttl = wait === null ? this.maxMs : Math.min(wait, this.maxMs);
    if (!(ttl > 0)) return;
    const id = `${n}\0${key}`;
    const at = this.now();
    this.entries.delete(id);
    this.entries.set(id, { at, until: at + ttl, decision: d });
    while (this.entries.size > this.size) {
      this.entries.delete(this.entries.keys().next().value);
    }
  }
}

module.exports = { DenyCache, DEFAULT_DENY_CACHE_MS, DEFAULT_DENY_CACHE_SIZE };
