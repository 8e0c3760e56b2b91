"use strict";
// The Limiter: one decision per request, one round trip per decision
// (none while the deny cache or the circuit breaker answers), as
// httplimit's Limiter.
const { performance } = require("node:perf_hooks");
const errors = require("./errors");
const { compileAll, MAX_QUANTITY } = require("./policy");
const { serverKey } = require("./key");
const { parseReply } = require("./decision");
const { Breaker, Outcome, DEFAULT_BREAKER_FAILURES, DEFAULT_BREAKER_COOL_DOWN_MS } = require("./breaker");
const { DenyCache, DEFAULT_DENY_CACHE_MS, DEFAULT_DENY_CACHE_SIZE } = require("./denycache");

/** DEFAULT_TIMEOUT_MS bounds one decision (one round trip). */
const DEFAULT_TIMEOUT_MS = 100;

/**
 * ioredisOptions returns the ioredis options a limiter's client should
 * have, merged over extra: no offline queue (a command sent while the
 * connection is down fails at once instead of waiting for a reconnect),
 * no retry of a failed command, and reconnects backing off to 1 s. With
 * them, a closed port costs a request no wait: the refused connection
 * opens the circuit breaker at once.
 */
function ioredisOptions(extra = {}) {
  return {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: 1000,
    retryStrategy: (times) => Math.min(times * 100, 1000),
    ...extra,
  };
}

/**
 * createClient returns an ioredis client of cellserver at address
 * ("host:port", "[::1]:port") with ioredisOptions(extra).
 */
function createClient(address, extra = {}) {
  const m = typeof address === "string" ? address.match(/^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/) : null;
  if (!m || Number(m[3]) > 65535) {
    throw new errors.InvalidOptionError(`cellserver-limit: invalid option: address ${JSON.stringify(address)} must be HOST:PORT`);
  }
  const Redis = require("ioredis");
  return new Redis({ host: m[1] || m[2], port: Number(m[3]), ...ioredisOptions(extra) });
}

function positiveInt(v, what) {
  if (!Number.isInteger(v) || v < 1) {
    throw new errors.InvalidOptionError(`cellserver-limit: invalid option: ${what} ${v} must be a positive whole number`);
  }
  return v;
}

/**
 * Limiter decides requests against a set of policies.
 *
 * new Limiter(client, policies, options): client is an ioredis Redis or
 * Cluster (give it ioredisOptions()); policies as policy.js documents them,
 * decided with their own command when there is one, else all GCRA and
 * together by one CL.THROTTLEALL, so that a request consumes from every
 * policy or from none. Options:
 *   timeoutMs       bound of one decision (default 100)
 *   keyPrefix       put before every server key (default ""; no brace)
 *   circuitBreaker  {failures = 5, coolDownMs = 1000}, or false to turn it off
 *   denyCacheMs     the longest a refusal is reused locally (default 1000; 0: off)
 *   denyCacheSize   the most refusals remembered (default 10000)
 *   now             a monotonic clock in ms (tests pass a fake one)
 *
 * The limiter listens to the client's "error" events, to tell a refused
 * connection (which opens the breaker at once) from others.
 */
class Limiter {
  constructor(client, policies, options = {}) {
    if (!client || typeof client.call !== "function") {
      throw new errors.InvalidOptionError("cellserver-limit: invalid option: client must be an ioredis client");
    }
    this.policies = compileAll(policies);
    const o = options || {};
    this.prefix = o.keyPrefix === undefined ? "" : String(o.keyPrefix);
    if (/[{}]/.test(this.prefix)) {
      throw new errors.InvalidOptionError(`cellserver-limit: invalid option: key prefix ${JSON.stringify(this.prefix)} must not hold a brace`);
    }
    this.timeoutMs = o.timeoutMs === undefined ? DEFAULT_TIMEOUT_MS : o.timeoutMs;
    if (typeof this.timeoutMs !== "number" || !(this.timeoutMs > 0) || !Number.isFinite(this.timeoutMs)) {
      throw new errors.InvalidOptionError(`cellserver-limit: invalid option: timeoutMs ${this.timeoutMs} must be positive`);
    }
    const now = o.now || (() => performance.now());
    this.breaker = null;
    if (o.circuitBreaker !== false) {
      const cb = o.circuitBreaker || {};
      const failures = cb.failures === undefined ? DEFAULT_BREAKER_FAILURES : cb.failures;
      const coolDownMs = cb.coolDownMs === undefined ? DEFAULT_BREAKER_COOL_DOWN_MS : cb.coolDownMs;
      positiveInt(failures, "circuit breaker failures");
      if (typeof coolDownMs !== "number" || !(coolDownMs > 0)) {
        throw new errors.InvalidOptionError(`cellserver-limit: invalid option: circuit breaker coolDownMs ${coolDownMs} must be positive`);
      }
      this.breaker = new Breaker(failures, coolDownMs, now);
    }
    const denyMs = o.denyCacheMs === undefined ? DEFAULT_DENY_CACHE_MS : o.denyCacheMs;
    if (typeof denyMs !== "number" || !(denyMs >= 0) || !Number.isFinite(denyMs)) {
      throw new errors.InvalidOptionError(`cellserver-limit: invalid option: denyCacheMs ${denyMs} must be 0 (off) or more`);
    }
    const denySize = positiveInt(o.denyCacheSize === undefined ? DEFAULT_DENY_CACHE_SIZE : o.denyCacheSize, "denyCacheSize");
    this.denyCache = denyMs > 0 ? new DenyCache(denyMs, denySize, now) : null;
    this.policyField = this.policies.map((c) => c.item).join(", ");
    this.stats = { decisions: 0, local: 0, round_trips: 0, errors: 0 };

    this.client = client;
    this.connError = null; // the client's last connection error, until it is ready again
    this.ready = null; // one promise shared by the decisions waiting for a connection
    client.on("error", (err) => {
      this.connError = err;
    });
    client.on("ready", () => {
      this.connError = null;
    });
  }

  /** serverKey returns the key the server holds for policy and a client key. */
  serverKey(policy, key) {
    return serverKey(this.prefix, policy, key);
  }

  /**
   * counters returns how many decisions were made (allowed or refused),
   * how many of them the deny cache made locally, how many commands went
   * to the server, and how many calls ended without a decision.
   */
  counters() {
    return { ...this.stats };
  }

  /** allow takes one unit for key from every policy; see allowN. */
  allow(key) {
    return this.allowN(key, 1);
  }

  /**
   * allowN takes n units (0 up to 2^40; 0 peeks) for key from every policy,
   * atomically, and resolves to a Decision. It rejects when there is no
   * decision: InvalidQuantityError, TimeoutError (no answer within
   * timeoutMs), ServerError (an error reply or a failed connection; cause
   * holds the client's error), BadReplyError, or CircuitOpenError (without
   * a round trip, while the breaker is open). A refusal cached by the deny
   * cache is answered without a round trip (decision.local is true).
   */
  async allowN(key, n = 1) {
    if (!Number.isInteger(n) || n < 0 || n > MAX_QUANTITY) {
      this.stats.errors++;
      throw new errors.InvalidQuantityError(`cellserver-limit: invalid quantity: ${n} is out of range 0 to 2^40`);
    }
    key = String(key);
    if (this.denyCache) {
      const d = this.denyCache.get(key, n);
      if (d) {
        this.stats.decisions++;
        this.stats.local++;
        return d;
      }
    }
    let ticket = { probe: false };
    if (this.breaker) {
      ticket = this.breaker.allow();
      if (ticket === null) {
        this.stats.errors++;
        throw new errors.CircuitOpenError();
      }
    }
    const args = this.command(key, n);
    let d;
    try {
      this.stats.round_trips++;
      d = parseReply(await this.send(args), this.policies);
    } catch (err) {
      this.stats.errors++;
      const e = this.wrap(args[0], err);
      if (this.breaker) this.breaker.done(ticket, this.classify(e));
      throw e;
    }
    if (this.breaker) this.breaker.done(ticket, Outcome.ANSWERED);
    this.stats.decisions++;
    if (this.denyCache) this.denyCache.put(key, n, d);
    return d;
  }

  /** parse turns a reply to this limiter's command into a Decision. */
  parse(reply) {
    return parseReply(reply, this.policies);
  }

  /**
   * command returns the one command deciding key: the policy's own
   * command, or CL.THROTTLEALL for several.
   */
  command(key, n) {
    if (this.policies.length === 1) {
      const c = this.policies[0];
      return [c.cmd, this.serverKey(c.name, key), ...c.params, n, ...c.suffix];
    }
    const args = ["CL.THROTTLEALL"];
    for (const c of this.policies) args.push(this.serverKey(c.name, key), ...c.params, n);
    return args;
  }

  // send makes the round trip, bounded by the timeout. A client still
  // connecting is waited for (within the timeout), since without an offline
  // queue it would refuse the command.
  send(args) {
    let timer;
    const deadline = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new errors.TimeoutError(`no answer within ${this.timeoutMs} ms`)), this.timeoutMs);
    });
    const call = (async () => {
      const status = this.client.status;
      if (status === "wait") this.client.connect().catch(() => {});
      if (status === "wait" || status === "connecting" || status === "connect") await this.whenReady();
      return this.client.call(...args);
    })();
    call.catch(() => {}); // settled after the deadline: nobody waits for it
    return Promise.race([call, deadline]).finally(() => clearTimeout(timer));
  }

  whenReady() {
    if (this.client.status === "ready") return Promise.resolve();
    if (!this.ready) {
      this.ready = new Promise((resolve, reject) => {
        const done = (err) => {
          this.client.off("ready", onReady);
          this.client.off("close", onClose);
          this.client.off("end", onClose);
          this.ready = null;
          if (err) reject(err);
          else resolve();
        };
        const onReady = () => done(null);
        const onClose = () => done(this.connError || new Error("connection closed"));
        this.client.once("ready", onReady);
        this.client.once("close", onClose);
        this.client.once("end", onClose);
      });
      this.ready.catch(() => {});
    }
    return this.ready;
  }

  // wrap gives an error of the round trip its type and the command's name.
  wrap(cmd, err) {
    if (err instanceof errors.BadReplyError) return err;
    if (err instanceof errors.TimeoutError) return new errors.TimeoutError(`cellserver-limit: ${cmd}: ${err.message}`);
    const e = new errors.ServerError(`cellserver-limit: ${cmd}: ${err && err.message}`, { cause: err });
    // A command refused for want of a connection: the connection's own
    // error says why (a refused connection opens the breaker at once).
    // connectionError is the connection's error (ECONNREFUSED...), or null.
    e.connectionError = null;
    if (err && err.name !== "ReplyError") e.connectionError = err.code ? err : this.connError;
    return e;
  }

  // classify returns what a failed round trip says of the server: an error
  // reply (WRONGTYPE, OOM, CLUSTERDOWN) or a reply of the wrong shape comes
  // from a server that answers.
  classify(e) {
    if (e instanceof errors.BadReplyError) return Outcome.ANSWERED;
    if (e instanceof errors.ServerError && e.cause && e.cause.name === "ReplyError") return Outcome.ANSWERED;
    if (e instanceof errors.ServerError && e.connectionError && e.connectionError.code === "ECONNREFUSED") return Outcome.REFUSED;
    return Outcome.FAILED;
  }
}

module.exports = { Limiter, ioredisOptions, createClient, DEFAULT_TIMEOUT_MS };
