"use strict";
// HTTP middleware for Express 5 (and any (req, res, next) framework on
// node:http): httplimit's middleware, the same fields, answers and
// failure modes.
const { Limiter } = require("./limiter");
const { decisionFields, seconds } = require("./decision");
const { InvalidOptionError } = require("./errors");

/** The type of a 429's body, the problem type the RateLimit draft registers. */
const PROBLEM_QUOTA_EXCEEDED = "https://iana.org/assignments/http-problem-types#quota-exceeded";

/** writeProblem answers with an RFC 9457 problem (application/problem+json). */
function writeProblem(res, p) {
  const body = JSON.stringify(p);
  res.statusCode = p.status;
  res.setHeader("Content-Type", "application/problem+json");
  res.setHeader("Content-Length", Buffer.byteLength(body));
  res.end(body);
}

/** refusalProblem is the body of a 429 for the refused decision d. */
function refusalProblem(d) {
  const wait = d.retryAfterMs();
  return {
    type: PROBLEM_QUOTA_EXCEEDED,
    title: "Quota Exceeded",
    status: 429,
    detail:
      wait === null
        ? "The request is larger than the whole quota of a policy: it can never be allowed."
        : `Too many requests: retry in ${seconds(wait)} s.`,
    "violated-policies": d.violated(),
  };
}

/**
 * middleware returns Express middleware, async (req, res, next), that
 * decides every request against policies with one round trip (see
 * Limiter) under the key key(req) gives it; a request with no key (null)
 * passes unlimited. The Limiter is its .limiter property.
 *
 * An allowed request goes on with RateLimit-Policy and RateLimit set (and
 * X-RateLimit-* with legacy). A refused one gets the same fields,
 * Retry-After (unless a policy can never allow it) and 429 with an
 * application/problem+json body naming the refusing policies. With no
 * decision, it goes on without fields (fail open, the default) or gets 503
 * (failClosed). Options, besides the Limiter's:
 *   failClosed  answer 503 when there is no decision (default false)
 *   legacy      add X-RateLimit-Limit, -Remaining and -Reset (default false)
 *   ietf        send RateLimit-Policy and RateLimit (default true)
 *   quantity    (req) => what the request costs (default 1)
 *   onError     (req, err) => void, for every request with no decision
 *   onDecision  (req, decision) => void, for every decision
 *   limited     (req, res, decision) => void, writes the answer to a refused
 *               request instead of the 429 problem (the fields are set)
 *   limiter     an existing Limiter, instead of client and policies
 */
function middleware(client, policies, key, options = {}) {
  if (typeof key !== "function") {
    throw new InvalidOptionError("cellserver-limit: invalid option: key must be a function (req) => string or null");
  }
  const o = options || {};
  const limiter = o.limiter instanceof Limiter ? o.limiter : new Limiter(client, policies, o);
  const fieldOpts = { legacy: Boolean(o.legacy), ietf: o.ietf !== false };
  const limit = async function limit(req, res, next) {
    const k = key(req);
    if (k === null || k === undefined) return next();
    let d;
    try {
      const n = o.quantity ? o.quantity(req) : 1;
      d = await limiter.allowN(k, n);
    } catch (err) {
      if (o.onError) o.onError(req, err);
      if (o.failClosed) {
        return writeProblem(res, { type: "about:blank", title: "Service Unavailable", status: 503, detail: "The rate limiter is unavailable." });
      }
      return next();
    }
    if (o.onDecision) o.onDecision(req, d);
    const fields = decisionFields(d, limiter.policyField, fieldOpts);
    for (const [name, value] of Object.entries(fields)) res.setHeader(name, value);
    if (d.allowed) return next();
    if (o.limited) return o.limited(req, res, d);
    return writeProblem(res, refusalProblem(d));
  };
  limit.limiter = limiter;
  return limit;
}

module.exports = { middleware, writeProblem, refusalProblem, PROBLEM_QUOTA_EXCEEDED };
