"use strict";
// Decisions: the server's reply parsed (httplimit's parse and parseResult)
// and the HTTP fields derived from it (docs/http.md, "The fields").
const { BadReplyError } = require("./errors");
const { MAX_SF_INTEGER } = require("./policy");

// The largest time a reply may carry, per unit, as in httplimit: what fits
// a Go time.Duration (2^63 - 1 ns), so that both reject the same replies.
const MAX_TIME = { 1000: 9223372036, 1: 9223372036854 };

/**
 * Result is one policy's part of a Decision: the server's five integers,
 * times in milliseconds.
 *   policy       the policy's name
 *   limited      true when this policy refused the request
 *   limit        the policy's whole quota (GCRA: burst + 1)
 *   remaining    what the key has left after this request
 *   retryAfterMs how long until this same request would be allowed by this
 *                policy; -1 when it is allowed, and when it never can be
 *   resetAfterMs how long until the key is fresh again
 */

/** Decision is the outcome of one request against every policy. */
class Decision {
  /**
   * @param {boolean} allowed true when every policy allowed (and consumed)
   * @param {object[]} results one Result per policy, in the limiter's order
   * @param {boolean} local true when the deny cache decided it, without a round trip
   */
  constructor(allowed, results, local = false) {
    this.allowed = allowed;
    this.results = results;
    this.local = local;
  }

  /**
   * retryAfterMs returns, for a refused decision, how long until the
   * request could be allowed (the longest retryAfterMs of the refusing
   * policies), or null when it was allowed or can never be.
   */
  retryAfterMs() {
    if (this.allowed) return null;
    let wait = 0;
    for (const r of this.results) {
      if (!r.limited) continue;
      if (r.retryAfterMs < 0) return null;
      wait = Math.max(wait, r.retryAfterMs);
    }
    return wait;
  }

  /**
   * binding returns the index of the most restrictive policy, the one the
   * legacy X-RateLimit-* headers describe (-1 with no results): for a
   * refusal the refusing policy that never allows, else the one with the
   * longest retryAfterMs; when allowed the fewest remaining, then the
   * longest resetAfterMs. Earlier policies win ties.
   */
  binding() {
    let best = -1;
    this.results.forEach((r, i) => {
      if (best < 0) {
        best = i;
        return;
      }
      const b = this.results[best];
      if (!this.allowed) {
        if (!r.limited) return;
        if (!b.limited) best = i;
        else if (b.retryAfterMs < 0) return;
        else if (r.retryAfterMs < 0 || r.retryAfterMs > b.retryAfterMs) best = i;
        return;
      }
      if (r.remaining < b.remaining || (r.remaining === b.remaining && r.resetAfterMs > b.resetAfterMs)) best = i;
    });
    return best;
  }

  /** violated returns the names of the policies that refused, in order. */
  violated() {
    return this.results.filter((r) => r.limited).map((r) => r.policy);
  }
}

function describe(v) {
  if (Array.isArray(v)) return `array of ${v.length}`;
  return v === null ? "nil" : typeof v;
}

function toInt(x) {
  if (typeof x === "bigint") return x >= BigInt(Number.MIN_SAFE_INTEGER) && x <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(x) : null;
  return typeof x === "number" && Number.isInteger(x) ? x : null;
}

/**
 * parseResult reads one limiter reply for policy c: at least five
 * integers, limited 0 or 1, limit and remaining not negative (remaining at
 * most limit), retry_after -1 or more (-1 when allowed), reset_after not
 * negative, times within bounds. Anything else is a BadReplyError.
 */
function parseResult(v, c) {
  const where = `${c.cmd} for ${JSON.stringify(c.name)}`;
  if (!Array.isArray(v) || v.length < 5) {
    throw new BadReplyError(`cellserver-limit: unexpected reply from the server: ${where}: ${describe(v)}, want an array of at least 5 integers`);
  }
  const n = [];
  for (let i = 0; i < 5; i++) {
    const x = toInt(v[i]);
    if (x === null) throw new BadReplyError(`cellserver-limit: unexpected reply from the server: ${where}: field ${i + 1} is ${describe(v[i])}, want an integer`);
    n.push(x);
  }
  const maxTime = MAX_TIME[c.unitMs];
  const bad = (msg) => new BadReplyError(`cellserver-limit: unexpected reply from the server: ${where}: ${msg}`);
  if (n[0] !== 0 && n[0] !== 1) throw bad(`limited = ${n[0]}`);
  if (n[1] < 0 || n[2] < 0 || n[2] > n[1]) throw bad(`limit ${n[1]}, remaining ${n[2]}`);
  if (n[3] < -1 || n[3] > maxTime || n[4] < 0 || n[4] > maxTime) throw bad(`retry_after ${n[3]}, reset_after ${n[4]}`);
  if (n[0] === 0 && n[3] !== -1) throw bad(`allowed with retry_after ${n[3]}`);
  return {
    policy: c.name,
    limited: n[0] === 1,
    limit: n[1],
    remaining: n[2],
    retryAfterMs: n[3] >= 0 ? n[3] * c.unitMs : -1,
    resetAfterMs: n[4] * c.unitMs,
  };
}

/**
 * parseReply turns the server's reply to the command deciding policies
 * (compiled) into a Decision, refusing anything that is not shaped like
 * the limiter's reply.
 */
function parseReply(v, policies) {
  if (policies.length === 1) {
    const r = parseResult(v, policies[0]);
    return new Decision(!r.limited, [r]);
  }
  if (!Array.isArray(v) || v.length !== policies.length) {
    throw new BadReplyError(
      `cellserver-limit: unexpected reply from the server: CL.THROTTLEALL answered ${describe(v)}, want ${policies.length} arrays`,
    );
  }
  const results = v.map((x, i) => parseResult(x, policies[i]));
  return new Decision(!results.some((r) => r.limited), results);
}

/** seconds is ms in whole seconds rounded up, 0 or more, clamped. */
function seconds(ms) {
  if (!(ms > 0)) return 0;
  return Math.min(Math.ceil(ms / 1000), MAX_SF_INTEGER);
}

/**
 * rateLimitField returns the RateLimit field for d: one Item per policy,
 * `"<name>";r=<remaining>;t=<resetAfter in seconds, rounded up>`.
 */
function rateLimitField(d) {
  return d.results
    .map((r) => `${JSON.stringify(r.policy)};r=${Math.min(r.remaining, MAX_SF_INTEGER)};t=${seconds(r.resetAfterMs)}`)
    .join(", ");
}

/**
 * decisionFields returns the header fields a decision gives, as an object
 * of name → value, in the order they are set: RateLimit-Policy and
 * RateLimit (unless ietf is false), X-RateLimit-Limit, -Remaining and
 * -Reset (with legacy), and, on a refusal, Retry-After unless a refusing
 * policy can never allow the request.
 */
function decisionFields(d, policyField, { legacy = false, ietf = true } = {}) {
  const h = {};
  if (ietf) {
    h["RateLimit-Policy"] = policyField;
    h["RateLimit"] = rateLimitField(d);
  }
  if (legacy) {
    const i = d.binding();
    if (i >= 0) {
      const b = d.results[i];
      h["X-RateLimit-Limit"] = String(b.limit);
      h["X-RateLimit-Remaining"] = String(b.remaining);
      h["X-RateLimit-Reset"] = String(seconds(b.resetAfterMs));
    }
  }
  if (!d.allowed) {
    const wait = d.retryAfterMs();
    if (wait !== null) h["Retry-After"] = String(seconds(wait));
  }
  return h;
}

module.exports = { Decision, parseReply, parseResult, rateLimitField, decisionFields, seconds };
