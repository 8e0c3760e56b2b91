"""WSGI middleware (Flask, Django, any WSGI application).

    import flask, redis
    from cellserver_limit import Limiter, Policy, by_ip
    from cellserver_limit.wsgi import RateLimitMiddleware

    app = flask.Flask(__name__)
    limiter = Limiter(redis.Redis(host="127.0.0.1", port=6379, socket_timeout=0.1), [
        Policy("burst", burst=19, count=10, period=1),
    ])
    app.wsgi_app = RateLimitMiddleware(app.wsgi_app, limiter, by_ip("10.0.0.0/8"))
"""

from typing import Any, Callable, Iterable

from ._http import PROBLEM_JSON, Middleware, merge, quantity
from ._keys import Request
from ._limiter import Limiter

WSGIApp = Callable[[dict, Callable[..., Any]], Iterable[bytes]]

_STATUS = {429: "429 Too Many Requests", 503: "503 Service Unavailable"}


def request_of(environ: dict) -> Request:
    """The key functions' view of a WSGI environ. Header values (latin-1
    native strings, PEP 3333) are turned back into the client's bytes and
    decoded as UTF-8 with any other byte kept (surrogateescape)."""
    headers = [
        (k[5:].replace("_", "-").lower(), v.encode("latin-1", "replace").decode("utf-8", "surrogateescape"))
        for k, v in environ.items()
        if k.startswith("HTTP_") and isinstance(v, str)
    ]
    return Request(environ.get("REMOTE_ADDR") or None, headers, environ)


class RateLimitMiddleware(Middleware):
    """Decides every request against a Limiter under the key that key
    (by_ip() by default) gives it, as the ASGI middleware does (see
    cellserver_limit.asgi.RateLimitMiddleware for the answers and options);
    limited_app is a WSGI application that writes the 429 instead.

    A WSGI server calls it from many threads: the Limiter is safe for that.
    """

    _LIMITER = Limiter
    _LIMITER_WANT = "a Limiter (redis.Redis)"

    def __call__(self, environ: dict, start_response: Callable[..., Any]) -> Iterable[bytes]:
        opts = self._opts
        req = request_of(environ)
        key = opts.key(req)
        if key is None:  # as httplimit: a key function's "" is a key (hashed)
            return self.app(environ, start_response)
        try:
            d = self.limiter.allow(key, quantity(opts, req))
        except Exception as e:  # no decision: fail open or closed, as httplimit
            answer = self._answer(req, None, e)
        else:
            answer = self._answer(req, d, None)
        if answer.status == 0:
            return self.app(environ, _adding(start_response, answer.fields))
        if answer.status == 429 and self.limited_app is not None:
            return self.limited_app(environ, _adding(start_response, answer.fields))
        headers = merge([("Content-Type", PROBLEM_JSON), ("Content-Length", str(len(answer.body)))], answer.fields)
        start_response(_STATUS[answer.status], headers)
        return [answer.body]


def _adding(start_response: Callable[..., Any], fields) -> Callable[..., Any]:
    if not fields:
        return start_response

    def wrapped(status: str, headers: list, exc_info: Any = None) -> Any:
        return start_response(status, merge(headers, fields), exc_info)

    return wrapped
