"""What the ASGI and WSGI middlewares share: options, and the answer a
decision (or its absence) gives, as httplimit's middleware answers."""

from typing import Any, Callable, List, Optional, Tuple

from ._decision import Decision, decision_fields, refused_body, unavailable_body
from ._errors import InvalidOptionError
from ._keys import KeyFunc, Request, by_ip

Fields = List[Tuple[str, str]]

PROBLEM_JSON = "application/problem+json"


class Answer:
    """What the middleware does with one request: pass it on (status 0)
    with fields to add, or answer it with status, fields and body."""

    __slots__ = ("status", "fields", "body")

    def __init__(self, status: int, fields: Fields, body: bytes = b""):
        self.status = status
        self.fields = fields
        self.body = body


class Options:
    """The middlewares' options, validated once."""

    def __init__(
        self,
        key: Optional[KeyFunc],
        fail_closed: bool,
        legacy_headers: bool,
        ietf_headers: bool,
        on_error: Optional[Callable[[Request, BaseException], None]],
        on_decision: Optional[Callable[[Request, Decision], None]],
        quantity: Optional[Callable[[Request], int]],
    ):
        if key is None:
            key = by_ip()
        if not callable(key):
            raise InvalidOptionError(f"key {key!r} is not a key function")
        for name, f in (("on_error", on_error), ("on_decision", on_decision), ("quantity", quantity)):
            if f is not None and not callable(f):
                raise InvalidOptionError(f"{name} {f!r} is not callable")
        self.key = key
        self.fail_closed = bool(fail_closed)
        self.legacy = bool(legacy_headers)
        self.ietf = bool(ietf_headers)
        self.on_error = on_error
        self.on_decision = on_decision
        self.quantity = quantity


class Middleware:
    """The constructor and the answer both middlewares share; a subclass
    names the limiter class it takes (_LIMITER, _LIMITER_WANT) and calls
    the limiter its own way (awaited or not)."""

    _LIMITER: type = object
    _LIMITER_WANT = ""

    def __init__(
        self,
        app: Any,
        limiter: Any,
        key: Optional[KeyFunc] = None,
        *,
        fail_closed: bool = False,
        legacy_headers: bool = False,
        ietf_headers: bool = True,
        on_error: Optional[Callable[[Request, BaseException], None]] = None,
        on_decision: Optional[Callable[[Request, Decision], None]] = None,
        quantity: Optional[Callable[[Request], int]] = None,
        limited_app: Optional[Any] = None,
    ):
        if not isinstance(limiter, self._LIMITER):
            raise InvalidOptionError(f"limiter {limiter!r} must be {self._LIMITER_WANT}")
        self.app = app
        self.limiter = limiter
        self.limited_app = limited_app
        self._opts = Options(key, fail_closed, legacy_headers, ietf_headers, on_error, on_decision, quantity)

    def _answer(self, req: Request, d: Optional[Decision], exc: Optional[BaseException]) -> Answer:
        """The answer to req: to decision d, or to exc when there is none."""
        if exc is not None:
            return no_decision(self._opts, req, exc)
        return decided(self._opts, req, d, self.limiter._core.policies)


def quantity(opts: Options, req: Request) -> int:
    return 1 if opts.quantity is None else opts.quantity(req)


def no_decision(opts: Options, req: Request, exc: BaseException) -> Answer:
    """The answer when the limiter gave no decision: pass on without fields
    (fail open) or 503 with a problem body (fail closed)."""
    if opts.on_error is not None:
        opts.on_error(req, exc)
    if opts.fail_closed:
        return Answer(503, [], unavailable_body())
    return Answer(0, [])


def decided(opts: Options, req: Request, d: Decision, policies) -> Answer:
    """The answer a decision gives: pass on with the fields, or 429 with the
    fields, Retry-After and a problem body naming the refusing policies."""
    if opts.on_decision is not None:
        opts.on_decision(req, d)
    fields = decision_fields(d, policies, ietf=opts.ietf, legacy=opts.legacy)
    if d.allowed:
        return Answer(0, fields)
    return Answer(429, fields, refused_body(d))


def merge(headers: Fields, fields: Fields) -> Fields:
    """headers with fields added, except those the application set itself
    (it wins, as a net/http handler overwriting the middleware's fields)."""
    if not fields:
        return headers
    have = {name.lower() for name, _ in headers}
    return list(headers) + [f for f in fields if f[0].lower() not in have]
