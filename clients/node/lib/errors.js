"use strict";
// The errors of cellserver-limit, one class per kind, as httplimit's
// sentinel errors (httplimit/errors.go). Test for them with instanceof or
// by their code; the message carries the detail (which policy, which value).

/** LimiterError is the base of every error this package throws. */
class LimiterError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = this.constructor.name;
  }
}

/**
 * InvalidPolicyError: a policy, or the set of policies, cannot be sent to
 * the server: an unknown algorithm, a value out of its command's range, a
 * bad or repeated name, or several policies that are not all GCRA.
 */
class InvalidPolicyError extends LimiterError {}
InvalidPolicyError.prototype.code = "ERR_INVALID_POLICY";

/** InvalidOptionError: an option out of its range. */
class InvalidOptionError extends LimiterError {}
InvalidOptionError.prototype.code = "ERR_INVALID_OPTION";

/** InvalidQuantityError: a quantity below 0 or above MAX_QUANTITY. */
class InvalidQuantityError extends LimiterError {}
InvalidQuantityError.prototype.code = "ERR_INVALID_QUANTITY";

/**
 * BadReplyError: the server's reply does not have the shape of a limiter
 * reply. The request is then a limiter failure, never a decision.
 */
class BadReplyError extends LimiterError {}
BadReplyError.prototype.code = "ERR_BAD_REPLY";

/**
 * CircuitOpenError: thrown without a round trip while the circuit breaker
 * is open (the server failed recently).
 */
class CircuitOpenError extends LimiterError {
  constructor() {
    super("cellserver-limit: circuit breaker open: the server failed recently");
  }
}
CircuitOpenError.prototype.code = "ERR_CIRCUIT_OPEN";

/** TimeoutError: the server did not answer within the limiter's timeout. */
class TimeoutError extends LimiterError {}
TimeoutError.prototype.code = "ERR_TIMEOUT";

/**
 * ServerError: the server answered an error (WRONGTYPE, OOM, CLUSTERDOWN,
 * ...), or the connection failed; cause holds the client's own error, and
 * connectionError the connection's (its code ECONNREFUSED when nothing
 * listens on the port), or null for an error reply.
 */
class ServerError extends LimiterError {}
ServerError.prototype.code = "ERR_SERVER";

module.exports = {
  LimiterError,
  InvalidPolicyError,
  InvalidOptionError,
  InvalidQuantityError,
  BadReplyError,
  CircuitOpenError,
  TimeoutError,
  ServerError,
};
