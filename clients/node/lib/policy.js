"use strict";
// Policies: validation, each algorithm's command and the RateLimit-Policy
// item, as httplimit/policy.go and internal/ratepolicy derive them.
const { InvalidPolicyError } = require("./errors");

/** The algorithms, by the names cellserver's TYPE reply gives them. */
const Algorithm = Object.freeze({
  GCRA: "gcra",
  TOKEN_BUCKET: "token-bucket",
  TOKEN_BUCKET_INTERVAL: "token-bucket-interval",
  LEAKY_BUCKET: "leaky-bucket",
  FIXED_WINDOW: "fixed-window",
  SLIDING_WINDOW: "sliding-window",
  SLIDING_LOG: "sliding-log",
});

/** MAX_COUNT bounds burst, count and a request's quantity: 2^40. */
const MAX_COUNT = 2 ** 40;
/** MAX_QUANTITY is the largest quantity one request may take. */
const MAX_QUANTITY = MAX_COUNT;
/** MAX_PERIOD_MS is the longest period: 3660 days, in milliseconds. */
const MAX_PERIOD_MS = 3660 * 24 * 3600 * 1000;
/** MAX_SF_INTEGER is the largest Integer a structured field can carry. */
const MAX_SF_INTEGER = 999_999_999_999_999;
const MAX_NAME_LEN = 64;

const WINDOW_COMMANDS = {
  [Algorithm.FIXED_WINDOW]: "FW.INCR",
  [Algorithm.SLIDING_WINDOW]: "SW.INCR",
  [Algorithm.SLIDING_LOG]: "SL.ADD",
};

// ceilDiv is ⌈n × periodMs / (count × 1000)⌉ seconds, at least 1 and at
// most MAX_SF_INTEGER, computed exactly (BigInt: 2^40 × 3660 days overflows
// a double's integers).
function windowSeconds(n, periodMs, count) {
  const num = BigInt(n) * BigInt(periodMs);
  const den = BigInt(count) * 1000n;
  let q = num / den;
  if (num % den !== 0n) q += 1n;
  if (q > BigInt(MAX_SF_INTEGER)) return MAX_SF_INTEGER;
  if (q < 1n) return 1;
  return Number(q);
}

function clampSF(n) {
  return Math.max(0, Math.min(n, MAX_SF_INTEGER));
}

// The quota and window of a RateLimit-Policy item (internal/ratepolicy).
function bucketItem(capacity, count, periodMs) {
  return { q: clampSF(capacity), w: windowSeconds(capacity, periodMs, count) };
}
function intervalItem(capacity, count, periodMs) {
  const refills = Math.ceil(capacity / count);
  return { q: clampSF(capacity), w: windowSeconds(refills, periodMs, 1) };
}
function windowItem(count, periodMs) {
  return { q: clampSF(count), w: windowSeconds(1, periodMs, 1) };
}

function checkName(name) {
  if (typeof name !== "string" || name.length === 0 || name.length > MAX_NAME_LEN) {
    throw new InvalidPolicyError(`cellserver-limit: invalid policy: name ${JSON.stringify(name)} must be 1 to ${MAX_NAME_LEN} characters`);
  }
  if (!/^[A-Za-z0-9_.-]+$/.test(name)) {
    throw new InvalidPolicyError(
      `cellserver-limit: invalid policy: name ${JSON.stringify(name)}: only ASCII letters, digits, '-', '_' and '.' are allowed`,
    );
  }
}

function isInt(n) {
  return typeof n === "number" && Number.isInteger(n);
}

/**
 * compile validates one policy and derives its command and header item.
 *
 * A policy is {name, algorithm = "gcra", burst = 0, count, periodMs}:
 *
 *   algorithm              command           burst            count            periodMs
 *   gcra                   CL.THROTTLE       max_burst        count_per_period period (whole seconds)
 *   token-bucket           TB.TAKE           capacity (>= 1)  refill_tokens    refill_period
 *   token-bucket-interval  TB.TAKE INTERVAL  capacity (>= 1)  refill_tokens    refill_period
 *   leaky-bucket           LB.ADD            capacity (>= 1)  leak_count       leak_period
 *   fixed-window           FW.INCR           0                limit            window
 *   sliding-window         SW.INCR           0                limit            window
 *   sliding-log            SL.ADD            0                limit            window
 *
 * burst is 0 to 2^40, count 1 to 2^40, periodMs 1 ms (1000 for GCRA) to
 * 3660 days, a whole number of milliseconds (of seconds for GCRA).
 */
function compile(p) {
  if (p === null || typeof p !== "object") {
    throw new InvalidPolicyError(`cellserver-limit: invalid policy: ${String(p)} is not an object`);
  }
  checkName(p.name);
  const algorithm = p.algorithm === undefined ? Algorithm.GCRA : p.algorithm;
  const burst = p.burst === undefined ? 0 : p.burst;
  const { count, periodMs } = p;
  const bad = (msg) => new InvalidPolicyError(`cellserver-limit: invalid policy: ${JSON.stringify(p.name)}: ${msg}`);
  if (!isInt(burst) || burst < 0 || burst > MAX_COUNT) throw bad(`burst ${burst} out of range 0 to 2^40`);
  if (!isInt(count) || count < 1 || count > MAX_COUNT) throw bad(`count ${count} out of range 1 to 2^40`);
  if (typeof periodMs !== "number" || !(periodMs > 0) || periodMs > MAX_PERIOD_MS) {
    throw bad(`periodMs ${periodMs} out of range (0, 3660 days]`);
  }
  if (!Number.isInteger(periodMs)) throw bad(`periodMs ${periodMs} is not a whole number of milliseconds`);
  const c = { name: p.name, algorithm, burst, count, periodMs, unitMs: 1, suffix: [] };
  const ms = `${periodMs}ms`;
  let item;
  switch (algorithm) {
    case Algorithm.GCRA:
      if (periodMs % 1000 !== 0) throw bad(`periodMs ${periodMs} is not a whole number of seconds (CL.THROTTLE)`);
      c.cmd = "CL.THROTTLE";
      c.unitMs = 1000;
      c.params = [burst, count, periodMs / 1000];
      item = bucketItem(burst + 1, count, periodMs);
      break;
    case Algorithm.TOKEN_BUCKET:
    case Algorithm.TOKEN_BUCKET_INTERVAL:
    case Algorithm.LEAKY_BUCKET:
      if (burst < 1) throw bad(`${algorithm} needs a capacity (burst) of at least 1`);
      c.cmd = algorithm === Algorithm.LEAKY_BUCKET ? "LB.ADD" : "TB.TAKE";
      c.params = [burst, count, ms];
      item = bucketItem(burst, count, periodMs);
      if (algorithm === Algorithm.TOKEN_BUCKET_INTERVAL) {
        c.suffix = ["INTERVAL"];
        item = intervalItem(burst, count, periodMs);
      }
      break;
    case Algorithm.FIXED_WINDOW:
    case Algorithm.SLIDING_WINDOW:
    case Algorithm.SLIDING_LOG:
      if (burst !== 0) throw bad(`${algorithm} takes no burst (got ${burst})`);
      c.cmd = WINDOW_COMMANDS[algorithm];
      c.params = [count, ms];
      item = windowItem(count, periodMs);
      break;
    default:
      throw bad(`unknown algorithm ${JSON.stringify(algorithm)} (want one of ${Object.values(Algorithm).join(", ")})`);
  }
  c.quota = item.q;
  c.window = item.w;
  c.item = `${JSON.stringify(p.name)};q=${item.q};w=${item.w}`;
  return c;
}

/**
 * compileAll validates a limiter's policies: at least one, unique names,
 * and only GCRA when there are several (one CL.THROTTLEALL decides them
 * atomically, and it takes GCRA policies only).
 */
function compileAll(policies) {
  if (!Array.isArray(policies) || policies.length === 0) {
    throw new InvalidPolicyError("cellserver-limit: invalid policy: no policy");
  }
  const seen = new Set();
  return policies.map((p) => {
    const c = compile(p);
    if (seen.has(c.name)) throw new InvalidPolicyError(`cellserver-limit: invalid policy: name ${JSON.stringify(c.name)} used twice`);
    seen.add(c.name);
    if (policies.length > 1 && c.algorithm !== Algorithm.GCRA) {
      throw new InvalidPolicyError(
        `cellserver-limit: invalid policy: ${JSON.stringify(c.name)}: several policies are decided in one atomic CL.THROTTLEALL, which takes GCRA policies only (got ${c.algorithm})`,
      );
    }
    return c;
  });
}

module.exports = { Algorithm, MAX_COUNT, MAX_QUANTITY, MAX_PERIOD_MS, MAX_SF_INTEGER, compile, compileAll };
