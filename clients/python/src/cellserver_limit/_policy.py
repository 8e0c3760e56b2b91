"""Policies: what one limit is, its command, and its RateLimit-Policy item.

The same rules as httplimit's Policy (httplimit/policy.go) and the quota
and window derivation of internal/ratepolicy: a policy that Go accepts,
Python accepts, and both advertise it the same way.
"""

import datetime
import decimal
import enum
import re
from dataclasses import dataclass
from typing import List, Tuple, Union

from ._errors import InvalidPolicyError

#: Bound of burst, count and a request's quantity: 2^40.
MAX_COUNT = 1 << 40
#: The largest quantity one request may take.
MAX_QUANTITY = MAX_COUNT
#: The longest period: 3660 days, in milliseconds.
MAX_PERIOD_MS = 3660 * 24 * 3600 * 1000
#: The largest Integer a structured field can carry (RFC 9651: 15 digits).
MAX_SF_INTEGER = 999_999_999_999_999

_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,64}\Z")


class Algorithm(str, enum.Enum):
    """The limiter command a Policy is decided with; the values are the
    algorithms' names in cellserver's TYPE reply."""

    #: CL.THROTTLE: burst + 1 at once, count per period; whole seconds.
    GCRA = "gcra"
    #: TB.TAKE: a bucket of burst tokens refilled continuously.
    TOKEN_BUCKET = "token-bucket"
    #: TB.TAKE ... INTERVAL: count tokens at once at the end of each period.
    TOKEN_BUCKET_INTERVAL = "token-bucket-interval"
    #: LB.ADD: a queue of burst requests draining count per period.
    LEAKY_BUCKET = "leaky-bucket"
    #: FW.INCR: count per window aligned to the Unix epoch; burst 0.
    FIXED_WINDOW = "fixed-window"
    #: SW.INCR: count per period, estimated from two windows; burst 0.
    SLIDING_WINDOW = "sliding-window"
    #: SL.ADD: exactly count in any period; burst 0.
    SLIDING_LOG = "sliding-log"

    def __str__(self) -> str:
        return self.value


_WINDOW_COMMANDS = {
    Algorithm.FIXED_WINDOW: "FW.INCR",
    Algorithm.SLIDING_WINDOW: "SW.INCR",
    Algorithm.SLIDING_LOG: "SL.ADD",
}

Period = Union[datetime.timedelta, int, float]


@dataclass(frozen=True)
class Policy:
    """One limit applied to every request, per key.

    What burst, count and period mean follows the algorithm (docs/http.md):

    ====================== ================ =============== ==============
    algorithm              command          burst           count / period
    ====================== ================ =============== ==============
    GCRA                   CL.THROTTLE      max_burst       count per period (whole seconds)
    TOKEN_BUCKET           TB.TAKE          capacity (>= 1) refill count per period
    TOKEN_BUCKET_INTERVAL  TB.TAKE INTERVAL capacity (>= 1) refill count per period
    LEAKY_BUCKET           LB.ADD           capacity (>= 1) leak count per period
    FIXED_WINDOW           FW.INCR          0               limit per window
    SLIDING_WINDOW         SW.INCR          0               limit per window
    SLIDING_LOG            SL.ADD           0               limit per window
    ====================== ================ =============== ==============

    name: 1 to 64 ASCII letters, digits, '-', '_' or '.', unique among a
    limiter's policies. burst: 0 to 2^40. count: 1 to 2^40. period: a
    datetime.timedelta or a number of seconds, 1 ms (1 s for GCRA) to 3660
    days, in whole milliseconds (whole seconds for GCRA).
    """

    name: str
    burst: int = 0
    count: int = 1
    period: Period = 1
    algorithm: Algorithm = Algorithm.GCRA


def period_ms(period: Period, name: str) -> int:
    """The period in whole milliseconds, or InvalidPolicyError."""
    if isinstance(period, datetime.timedelta):
        us = (period.days * 86400 + period.seconds) * 1_000_000 + period.microseconds
        if us % 1000:
            raise InvalidPolicyError(f"{name!r}: period {period} is not a whole number of milliseconds")
        return us // 1000
    if isinstance(period, bool) or not isinstance(period, (int, float)):
        raise InvalidPolicyError(f"{name!r}: period {period!r} must be a timedelta or a number of seconds")
    if isinstance(period, float):
        if period != period or period in (float("inf"), float("-inf")):
            raise InvalidPolicyError(f"{name!r}: period {period!r} is not a number of seconds")
        ms = decimal.Decimal(repr(period)) * 1000
    else:
        ms = decimal.Decimal(period) * 1000
    if ms != ms.to_integral_value():
        raise InvalidPolicyError(f"{name!r}: period {period!r} s is not a whole number of milliseconds")
    return int(ms)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _window_seconds(n: int, period_ms_: int, count: int) -> int:
    """ceil(n * period / count) in whole seconds, at least 1 and at most
    MAX_SF_INTEGER (internal/ratepolicy's seconds)."""
    s = _ceil_div(n * period_ms_, count * 1000)
    return max(1, min(s, MAX_SF_INTEGER))


def _clamp(n: int) -> int:
    return max(0, min(n, MAX_SF_INTEGER))


@dataclass(frozen=True)
class Compiled:
    """A validated policy with its command and RateLimit-Policy item."""

    policy: Policy
    command: str
    params: Tuple[Union[int, str], ...]  # between the key and the quantity
    suffix: Tuple[str, ...]  # after the quantity
    unit_ms: int  # the reply's unit of time, in milliseconds
    quota: int  # q
    window: int  # w, seconds, >= 1
    item: str  # "name";q=...;w=...

    @property
    def name(self) -> str:
        return self.policy.name


def _int(v: object, what: str, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise InvalidPolicyError(f"{name!r}: {what} {v!r} must be an integer")
    return v


def compile_policy(p: Policy) -> Compiled:
    """Validates p and derives its command and header item."""
    if not isinstance(p.name, str) or not _NAME.match(p.name):
        raise InvalidPolicyError(
            f"name {p.name!r} must be 1 to 64 characters: ASCII letters, digits, '-', '_' and '.'"
        )
    name = p.name
    try:
        algo = Algorithm(p.algorithm)
    except ValueError:
        raise InvalidPolicyError(f"{name!r}: unknown algorithm {p.algorithm!r}") from None
    burst = _int(p.burst, "burst", name)
    count = _int(p.count, "count", name)
    if not 0 <= burst <= MAX_COUNT:
        raise InvalidPolicyError(f"{name!r}: burst {burst} out of range 0 to 2^40")
    if not 1 <= count <= MAX_COUNT:
        raise InvalidPolicyError(f"{name!r}: count {count} out of range 1 to 2^40")
    ms = period_ms(p.period, name)
    if not 0 < ms <= MAX_PERIOD_MS:
        raise InvalidPolicyError(f"{name!r}: period {ms} ms out of range (0, 3660 days]")
    suffix: Tuple[str, ...] = ()
    unit = 1
    if algo is Algorithm.GCRA:
        if ms % 1000:
            raise InvalidPolicyError(f"{name!r}: period {ms} ms is not a whole number of seconds (CL.THROTTLE)")
        cmd, unit, params = "CL.THROTTLE", 1000, (burst, count, ms // 1000)
        q, w = _clamp(burst + 1), _window_seconds(burst + 1, ms, count)
    elif algo in (Algorithm.TOKEN_BUCKET, Algorithm.TOKEN_BUCKET_INTERVAL, Algorithm.LEAKY_BUCKET):
        if burst < 1:
            raise InvalidPolicyError(f"{name!r}: {algo} needs a capacity (burst) of at least 1")
        cmd = "LB.ADD" if algo is Algorithm.LEAKY_BUCKET else "TB.TAKE"
        params = (burst, count, f"{ms}ms")
        q, w = _clamp(burst), _window_seconds(burst, ms, count)
        if algo is Algorithm.TOKEN_BUCKET_INTERVAL:
            suffix = ("INTERVAL",)
            w = _window_seconds(_ceil_div(burst, count), ms, 1)
    else:
        if burst != 0:
            raise InvalidPolicyError(f"{name!r}: {algo} takes no burst (got {burst})")
        cmd, params = _WINDOW_COMMANDS[algo], (count, f"{ms}ms")
        q, w = _clamp(count), _window_seconds(1, ms, 1)
    return Compiled(
        policy=p, command=cmd, params=params, suffix=suffix, unit_ms=unit,
        quota=q, window=w, item=f'"{name}";q={q};w={w}',
    )


def compile_all(policies: List[Policy]) -> List[Compiled]:
    """Validates a limiter's policies: at least one, unique names, and only
    GCRA when there are several (CL.THROTTLEALL decides only GCRA limits)."""
    policies = list(policies)
    if not policies:
        raise InvalidPolicyError("no policy")
    out, seen = [], set()
    for p in policies:
        if not isinstance(p, Policy):
            raise InvalidPolicyError(f"{p!r} is not a Policy")
        c = compile_policy(p)
        if p.name in seen:
            raise InvalidPolicyError(f"name {p.name!r} used twice")
        seen.add(p.name)
        if len(policies) > 1 and Algorithm(p.algorithm) is not Algorithm.GCRA:
            raise InvalidPolicyError(
                f"{p.name!r}: several policies are decided in one atomic CL.THROTTLEALL, "
                f"which takes GCRA policies only (got {Algorithm(p.algorithm)})"
            )
        out.append(c)
    return out
