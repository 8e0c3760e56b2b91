"""Decisions: the server's reply read into Results, and the HTTP fields and
problem bodies derived from them (docs/http.md, "The fields")."""

import json
from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Sequence, Tuple

from ._errors import BadReplyError
from ._policy import MAX_SF_INTEGER, Compiled

_MAX_INT64 = (1 << 63) - 1

#: The type of a 429's body: the problem type draft-ietf-httpapi-ratelimit-headers registers.
PROBLEM_QUOTA_EXCEEDED = "https://iana.org/assignments/http-problem-types#quota-exceeded"


@dataclass(frozen=True)
class Result:
    """One policy's part of a Decision: the server's five integers, times in
    milliseconds."""

    #: The policy's name.
    policy: str
    #: True when this policy refused the request.
    limited: bool
    #: The policy's whole quota (GCRA: burst + 1).
    limit: int
    #: What the key has left after this request, 0 or more. In a refused
    #: CL.THROTTLEALL, a policy that would have allowed reports what a peek
    #: would (nothing was consumed).
    remaining: int
    #: Milliseconds until this same request would be allowed by this policy;
    #: -1 when it is allowed, and when it never can be (its quantity exceeds
    #: the whole limit). Whole seconds for GCRA, rounded up by the server.
    retry_after_ms: int
    #: Milliseconds until the key is back to fresh; 0 when it holds nothing.
    reset_after_ms: int


@dataclass(frozen=True)
class Decision:
    """The outcome of one request against every policy."""

    #: True when every policy allowed the request (and it was consumed).
    allowed: bool
    #: One Result per policy, in the limiter's order.
    results: Tuple[Result, ...]
    #: True when the deny cache decided it, without a round trip.
    local: bool = False

    def retry_after_ms(self) -> Optional[int]:
        """For a refused decision, milliseconds until the request could be
        allowed: the longest retry_after among the refusing policies. None
        when the decision allowed the request, and when a refusing policy can
        never allow it."""
        if self.allowed:
            return None
        wait = 0
        for r in self.results:
            if not r.limited:
                continue
            if r.retry_after_ms < 0:
                return None
            wait = max(wait, r.retry_after_ms)
        return wait

    def binding(self) -> int:
        """The index in results of the most restrictive policy, the one the
        legacy X-RateLimit-* fields describe (-1 when results is empty). For
        a refusal: the refusing policy that never allows, else the one with
        the longest retry_after. For an allowed request: the fewest
        remaining, the longest reset_after breaking a tie; earlier policies
        win remaining ties."""
        best = -1
        for i, r in enumerate(self.results):
            if best < 0:
                best = i
                continue
            b = self.results[best]
            if not self.allowed:
                if not r.limited:
                    pass
                elif not b.limited:
                    best = i
                elif b.retry_after_ms < 0:
                    pass
                elif r.retry_after_ms < 0 or r.retry_after_ms > b.retry_after_ms:
                    best = i
                continue
            if r.remaining < b.remaining or (r.remaining == b.remaining and r.reset_after_ms > b.reset_after_ms):
                best = i
        return best

    def violated(self) -> List[str]:
        """The names of the policies that refused, in order."""
        return [r.policy for r in self.results if r.limited]


def _result(v: object, c: Compiled) -> Result:
    """Reads one limiter reply: at least five integers, limited 0 or 1,
    limit, remaining and reset_after not negative, retry_after -1 or more,
    times that fit a Go time.Duration (as httplimit checks)."""
    if not isinstance(v, list) or len(v) < 5:
        n = len(v) if isinstance(v, list) else 0
        raise BadReplyError(f"{c.command} for {c.name!r}: {type(v).__name__} of {n}, want an array of at least 5 integers")
    n = v[:5]
    for i, x in enumerate(n):
        if type(x) is not int:  # noqa: E721 (bool is not an integer reply)
            raise BadReplyError(f"{c.command} for {c.name!r}: field {i + 1} is {type(x).__name__}, want an integer")
    limited, limit, remaining, retry, reset = n
    max_time = _MAX_INT64 // (c.unit_ms * 1_000_000)
    if limited not in (0, 1):
        raise BadReplyError(f"{c.command} for {c.name!r}: limited = {limited}")
    if limit < 0 or remaining < 0 or remaining > limit:
        raise BadReplyError(f"{c.command} for {c.name!r}: limit {limit}, remaining {remaining}")
    if retry < -1 or retry > max_time or reset < 0 or reset > max_time:
        raise BadReplyError(f"{c.command} for {c.name!r}: retry_after {retry}, reset_after {reset}")
    if limited == 0 and retry != -1:
        raise BadReplyError(f"{c.command} for {c.name!r}: allowed with retry_after {retry}")
    return Result(
        policy=c.name, limited=limited == 1, limit=limit, remaining=remaining,
        retry_after_ms=retry * c.unit_ms if retry >= 0 else -1,
        reset_after_ms=reset * c.unit_ms,
    )


def parse_reply(reply: object, policies: Sequence[Compiled]) -> Decision:
    """Turns the server's reply to the limiter's command into a Decision,
    refusing (BadReplyError) anything not shaped like a limiter reply. One
    policy: its command's reply; several: CL.THROTTLEALL's array of them."""
    if len(policies) == 1:
        r = _result(reply, policies[0])
        return Decision(allowed=not r.limited, results=(r,))
    if not isinstance(reply, list) or len(reply) != len(policies):
        n = len(reply) if isinstance(reply, list) else 0
        raise BadReplyError(f"CL.THROTTLEALL answered {type(reply).__name__} of {n}, want {len(policies)} arrays")
    results = tuple(_result(v, c) for v, c in zip(reply, policies))
    return Decision(allowed=not any(r.limited for r in results), results=results)


def aged(d: Decision, elapsed_ns: int) -> Decision:
    """d as it stands elapsed_ns later, for the deny cache: remaining
    unchanged, reset_after and (for a refusal that can end) retry_after
    reduced by the time passed, rounded up to the millisecond, never below
    0 (retry_after never below 1 ms: the entry is still cached)."""
    def age(ms: int, floor: int) -> int:
        return max(floor, -(-(ms * 1_000_000 - elapsed_ns) // 1_000_000))

    results = tuple(
        replace(
            r,
            reset_after_ms=age(r.reset_after_ms, 0),
            retry_after_ms=age(r.retry_after_ms, 1) if r.retry_after_ms >= 0 else r.retry_after_ms,
        )
        for r in d.results
    )
    return Decision(allowed=d.allowed, results=results, local=True)


def seconds(ms: int) -> int:
    """ms in whole seconds rounded up, as delay-seconds (0 or more), clamped
    to the largest structured-field Integer."""
    if ms <= 0:
        return 0
    return min(-(-ms // 1000), MAX_SF_INTEGER)


def policy_field(policies: Sequence[Compiled]) -> str:
    """The value of RateLimit-Policy: one item per policy, in order."""
    return ", ".join(c.item for c in policies)


def ratelimit_field(d: Decision) -> str:
    """The value of RateLimit: one item per policy, in order,
    "<name>";r=<remaining>;t=<reset_after in seconds, rounded up>."""
    return ", ".join(
        f'"{r.policy}";r={min(r.remaining, MAX_SF_INTEGER)};t={seconds(r.reset_after_ms)}' for r in d.results
    )


def decision_fields(
    d: Decision, policies: Sequence[Compiled], *, ietf: bool = True, legacy: bool = False
) -> List[Tuple[str, str]]:
    """The response fields d gives, in the order httplimit sets them:
    RateLimit-Policy and RateLimit (ietf), X-RateLimit-Limit, -Remaining and
    -Reset of the binding policy (legacy), and Retry-After on a refusal that
    can end."""
    out: List[Tuple[str, str]] = []
    if ietf:
        out.append(("RateLimit-Policy", policy_field(policies)))
        out.append(("RateLimit", ratelimit_field(d)))
    if legacy:
        i = d.binding()
        if i >= 0:
            b = d.results[i]
            out.append(("X-RateLimit-Limit", str(b.limit)))
            out.append(("X-RateLimit-Remaining", str(b.remaining)))
            out.append(("X-RateLimit-Reset", str(seconds(b.reset_after_ms))))
    if not d.allowed:
        wait = d.retry_after_ms()
        if wait is not None:
            out.append(("Retry-After", str(seconds(wait))))
    return out


def _problem(p: Dict[str, object]) -> bytes:
    # Go's encoding/json: compact, fields in declaration order.
    return json.dumps(p, separators=(",", ":"), ensure_ascii=False).encode()


def refused_body(d: Decision) -> bytes:
    """The application/problem+json body of a 429 (RFC 9457), byte for byte
    httplimit's."""
    wait = d.retry_after_ms()
    if wait is not None:
        detail = f"Too many requests: retry in {seconds(wait)} s."
    else:
        detail = "The request is larger than the whole quota of a policy: it can never be allowed."
    p: Dict[str, object] = {
        "type": PROBLEM_QUOTA_EXCEEDED, "title": "Quota Exceeded", "status": 429, "detail": detail,
    }
    violated = d.violated()
    if violated:
        p["violated-policies"] = violated
    return _problem(p)


def unavailable_body() -> bytes:
    """The application/problem+json body of a 503 (fail closed)."""
    return _problem({
        "type": "about:blank", "title": "Service Unavailable", "status": 503,
        "detail": "The rate limiter is unavailable.",
    })
