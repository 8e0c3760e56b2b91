"use strict";
// cellserver-limit: rate limits for Node services, decided by cellserver.
// The same policies, keys, decisions, fields and failure modes as the Go
// package httplimit (docs/http.md), plus a deny cache that answers a key
// the server refused locally until its retry_after passes.
const errors = require("./lib/errors");
const policy = require("./lib/policy");
const key = require("./lib/key");
const decision = require("./lib/decision");
const { Limiter, ioredisOptions, createClient, DEFAULT_TIMEOUT_MS } = require("./lib/limiter");
const { middleware, PROBLEM_QUOTA_EXCEEDED } = require("./lib/middleware");
const { DEFAULT_BREAKER_FAILURES, DEFAULT_BREAKER_COOL_DOWN_MS } = require("./lib/breaker");
const { DEFAULT_DENY_CACHE_MS, DEFAULT_DENY_CACHE_SIZE } = require("./lib/denycache");

module.exports = {
  Limiter,
  middleware,
  ioredisOptions,
  createClient,
  Decision: decision.Decision,
  decisionFields: decision.decisionFields,
  rateLimitField: decision.rateLimitField,
  Algorithm: policy.Algorithm,
  byIP: key.byIP,
  byHeader: key.byHeader,
  byUser: key.byUser,
  firstKey: key.firstKey,
  ...errors,
  MAX_COUNT: policy.MAX_COUNT,
  MAX_QUANTITY: policy.MAX_QUANTITY,
  MAX_PERIOD_MS: policy.MAX_PERIOD_MS,
  PROBLEM_QUOTA_EXCEEDED,
  DEFAULT_TIMEOUT_MS,
  DEFAULT_BREAKER_FAILURES,
  DEFAULT_BREAKER_COOL_DOWN_MS,
  DEFAULT_DENY_CACHE_MS,
  DEFAULT_DENY_CACHE_SIZE,
};
