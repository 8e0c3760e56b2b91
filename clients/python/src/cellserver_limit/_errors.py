"""The errors of cellserver_limit, one class per kind, as httplimit's."""


class LimitError(Exception):
    """Base class of every error this package raises itself."""


class InvalidPolicyError(LimitError, ValueError):
    """A policy, or the set of policies, cannot be sent to the server: an
    unknown algorithm, a value out of its command's range, a bad or repeated
    name, or several policies that are not all GCRA. Raised when a limiter is
    built, never per request."""


class InvalidOptionError(LimitError, ValueError):
    """An option out of its range (a timeout that is not positive, a key
    prefix with a brace, a middleware given the wrong kind of limiter)."""


class InvalidQuantityError(LimitError, ValueError):
    """A quantity below 0 or above MAX_QUANTITY. The middlewares handle it as
    a limiter failure (fail open or closed)."""


class NoDecisionError(LimitError):
    """Base class of the errors that leave a request without a decision
    although the limiter is well configured: the middlewares fail the request
    open or closed. Errors of redis-py (redis.RedisError: the server
    unreachable, an error reply such as CLUSTERDOWN) leave it without a
    decision too and are raised as they are."""


class BadReplyError(NoDecisionError):
    """The server's reply does not have the shape of a limiter reply (wrong
    type, length or range)."""


class DecisionTimeoutError(NoDecisionError, TimeoutError):
    """No decision came within the limiter's timeout (100 ms by default)."""


class CircuitOpenError(NoDecisionError):
    """Raised without a round trip while the circuit breaker is open: the
    server failed recently."""
