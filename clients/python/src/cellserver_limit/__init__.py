"""cellserver_limit: cellserver rate limits in front of Python web services.

The Python twin of cellserver's Go package httplimit: the same policies,
server keys, commands, decisions, HTTP fields, 429 body, fail-open/closed,
timeout and circuit breaker, plus a deny cache that answers a refused key
locally until its retry_after passes (docs/http.md, "Python").

- Limiter (redis.Redis) and AsyncLimiter (redis.asyncio.Redis) decide a key
  against policies with one round trip: allow(key, n=1) -> Decision.
- cellserver_limit.asgi.RateLimitMiddleware (Starlette, FastAPI) and
  cellserver_limit.wsgi.RateLimitMiddleware (Flask) answer HTTP requests.
- by_ip, by_header, by_user and first_key name what a request counts
  against.
"""

from ._breaker import DEFAULT_BREAKER_COOL_DOWN, DEFAULT_BREAKER_FAILURES
from ._decision import (
    PROBLEM_QUOTA_EXCEEDED,
    Decision,
    Result,
    decision_fields,
    parse_reply,
    policy_field,
    ratelimit_field,
    refused_body,
)
from ._denycache import DEFAULT_DENY_CACHE_MAX, DEFAULT_DENY_CACHE_SIZE
from ._errors import (
    BadReplyError,
    CircuitOpenError,
    DecisionTimeoutError,
    InvalidOptionError,
    InvalidPolicyError,
    InvalidQuantityError,
    LimitError,
    NoDecisionError,
)
from ._keys import KeyFunc, Request, by_header, by_ip, by_user, client_ip, first_key, hash_tag
from ._limiter import DEFAULT_TIMEOUT, AsyncLimiter, Limiter
from ._policy import MAX_COUNT, MAX_PERIOD_MS, MAX_QUANTITY, Algorithm, Policy, compile_all

__version__ = "0.1.0"

__all__ = [
    "Algorithm", "AsyncLimiter", "BadReplyError", "CircuitOpenError", "DEFAULT_BREAKER_COOL_DOWN",
    "DEFAULT_BREAKER_FAILURES", "DEFAULT_DENY_CACHE_MAX", "DEFAULT_DENY_CACHE_SIZE", "DEFAULT_TIMEOUT",
    "Decision", "DecisionTimeoutError", "InvalidOptionError", "InvalidPolicyError", "InvalidQuantityError",
    "KeyFunc", "LimitError", "Limiter", "MAX_COUNT", "MAX_PERIOD_MS", "MAX_QUANTITY", "NoDecisionError",
    "PROBLEM_QUOTA_EXCEEDED", "Policy", "Request", "Result", "by_header", "by_ip", "by_user", "client_ip",
    "compile_all", "decision_fields", "first_key", "hash_tag", "parse_reply", "policy_field",
    "ratelimit_field", "refused_body",
]
