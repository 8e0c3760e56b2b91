"""ASGI middleware (Starlette, FastAPI, any ASGI 3 application).

    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    import redis.asyncio
    from cellserver_limit import AsyncLimiter, Policy, by_ip
    from cellserver_limit.asgi import RateLimitMiddleware

    limiter = AsyncLimiter(redis.asyncio.Redis(host="127.0.0.1", port=6379), [
        Policy("burst", burst=19, count=10, period=1),
        Policy("daily", burst=9999, count=10000, period=86400),
    ])
    app = Starlette(routes=..., middleware=[
        Middleware(RateLimitMiddleware, limiter=limiter, key=by_ip("10.0.0.0/8")),
    ])
"""

from typing import Awaitable, Callable

from ._http import PROBLEM_JSON, Answer, Middleware, merge, quantity
from ._keys import Request
from ._limiter import AsyncLimiter

Scope = dict
Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]



def request_of(scope: Scope) -> Request:
    """The key functions' view of an ASGI HTTP scope. Header values are
    decoded as UTF-8, with any other byte kept (surrogateescape), so that a
    key made of a header reaches the server as the bytes the client sent."""
    client = scope.get("client")
    headers = [
        (k.decode("latin-1").lower(), v.decode("utf-8", "surrogateescape"))
        for k, v in scope.get("headers") or ()
    ]
    return Request(client[0] if client else None, headers, scope)


def _encode(fields) -> list:
    return [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in fields]


class RateLimitMiddleware(Middleware):
    """Decides every HTTP request against an AsyncLimiter under the key that
    key (by_ip() by default) gives it; a request without a key, and every
    scope that is not HTTP (websocket, lifespan), passes unlimited.

    An allowed request goes on to the application with RateLimit-Policy and
    RateLimit (and X-RateLimit-* with legacy_headers) added to its response.
    A refused one gets the same fields, Retry-After (unless a policy can never
    allow it) and 429 with an application/problem+json body naming the
    refusing policies; limited_app, when given, writes that response instead
    (the fields are added to it). When there is no decision the request goes
    on without fields (the default, fail open) or gets 503 (fail_closed).

    on_error(request, exc) sees every request that got no decision, before it
    is failed open or closed; on_decision(request, decision) every decision;
    quantity(request) is what a request costs (default 1; 0 peeks).
    """

    _LIMITER = AsyncLimiter
    _LIMITER_WANT = "an AsyncLimiter (redis.asyncio)"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        opts = self._opts
        req = request_of(scope)
        key = opts.key(req)
        if key is None:  # as httplimit: a key function's "" is a key (hashed)
            await self.app(scope, receive, send)
            return
        try:
            d = await self.limiter.allow(key, quantity(opts, req))
        except Exception as e:  # no decision: fail open or closed, as httplimit
            answer = self._answer(req, None, e)
        else:
            answer = self._answer(req, d, None)
        if answer.status == 0:
            await self.app(scope, receive, _adding(send, answer.fields))
        elif answer.status == 429 and self.limited_app is not None:
            await self.limited_app(scope, receive, _adding(send, answer.fields))
        else:
            await _respond(send, answer)


def _adding(send: Send, fields) -> Send:
    if not fields:
        return send
    encoded = _encode(fields)

    async def wrapped(message: dict) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers") or ())
            have = {k.lower() for k, _ in headers}
            message = dict(message, headers=headers + [f for f in encoded if f[0] not in have])
        await send(message)

    return wrapped


async def _respond(send: Send, answer: Answer) -> None:
    headers = merge([("Content-Type", PROBLEM_JSON), ("Content-Length", str(len(answer.body)))], answer.fields)
    await send({"type": "http.response.start", "status": answer.status, "headers": _encode(headers)})
    await send({"type": "http.response.body", "body": answer.body})
