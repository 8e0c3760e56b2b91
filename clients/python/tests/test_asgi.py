"""The ASGI middleware in a Starlette application, against the real server
(and a closed port): httplimit's answers, fields and failure modes."""

import asyncio
import json
import re
import time

import httpx
import redis.asyncio
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from cellserver_limit import AsyncLimiter, CircuitOpenError, Policy, by_header, by_ip
from cellserver_limit.asgi import RateLimitMiddleware

# The example's policies, but the burst refilling 1 a minute, not 10 a
# second, so that a slow machine cannot see a refill within a test.
EXAMPLE = [Policy("burst", 19, 1, 60), Policy("daily", 9999, 10000, 86400)]
POLICY_FIELD = '"burst";q=20;w=1200, "daily";q=10000;w=86400'
REFUSED_BODY = {
    "type": "https://iana.org/assignments/http-problem-types#quota-exceeded", "title": "Quota Exceeded",
    "status": 429, "detail": "Too many requests: retry in 60 s.", "violated-policies": ["burst"],
}


def app_with(limiter, **kw):
    async def hello(request):
        return PlainTextResponse("hello\n")

    async def own(request):
        return PlainTextResponse("own\n", headers={"RateLimit": "mine"})

    return Starlette(
        routes=[Route("/hello", hello), Route("/own", own)],
        middleware=[Middleware(RateLimitMiddleware, limiter=limiter, **kw)],
    )


async def get_many(app, n, path="/hello", client=("192.0.2.7", 1234), headers=None):
    transport = httpx.ASGITransport(app=app, client=client)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        out = []
        for _ in range(n):
            t = time.monotonic()
            r = await c.get(path, headers=headers)
            out.append((r, time.monotonic() - t))
        return out


def test_twenty_then_429(server, uniq):
    async def run():
        client = redis.asyncio.Redis(host=server[0], port=server[1])
        lim = AsyncLimiter(client, EXAMPLE, key_prefix=uniq + ":")
        got = await get_many(app_with(lim, legacy_headers=True), 22)
        await client.close()
        return got, lim.counters()

    got, counters = asyncio.run(run())
    first, _ = got[0]
    assert first.status_code == 200 and first.text == "hello\n"
    assert first.headers["ratelimit-policy"] == POLICY_FIELD
    assert first.headers["ratelimit"] == '"burst";r=19;t=60, "daily";r=9999;t=9'
    assert (first.headers["x-ratelimit-limit"], first.headers["x-ratelimit-remaining"]) == ("20", "19")
    assert "retry-after" not in first.headers
    assert [r.status_code for r, _ in got] == [200] * 20 + [429, 429]
    for r, _ in got[20:]:
        assert r.headers["content-type"] == "application/problem+json"
        assert r.headers["retry-after"] == "60"
        assert r.headers["ratelimit-policy"] == POLICY_FIELD
        assert re.fullmatch(r'"burst";r=0;t=1200, "daily";r=9980;t=17[23]', r.headers["ratelimit"])  # 20 × 8.64 s, less the time taken
        assert (r.headers["x-ratelimit-limit"], r.headers["x-ratelimit-remaining"], r.headers["x-ratelimit-reset"]) == ("20", "0", "1200")
        assert json.loads(r.content) == REFUSED_BODY
        assert int(r.headers["content-length"]) == len(r.content)
    # The 22nd came from the deny cache.
    assert counters == {"decisions": 22, "local": 1, "round_trips": 21, "errors": 0}


def test_options(server, uniq):
    async def limited(scope, receive, send):
        await send({"type": "http.response.start", "status": 429, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"slow down\n"})

    async def run():
        client = redis.asyncio.Redis(host=server[0], port=server[1])
        lim = AsyncLimiter(client, [Policy("p", 1, 1, 60)], key_prefix=uniq + ":")
        decisions = []
        app = app_with(lim, ietf_headers=False, legacy_headers=True, limited_app=limited,
                       quantity=lambda req: int(req.header("x-cost") or 1),
                       on_decision=lambda req, d: decisions.append(d.allowed))
        got = [r for r, _ in await get_many(app, 1, headers={"x-cost": "2"})]
        got += [r for r, _ in await get_many(app, 1)]
        got += [r for r, _ in await get_many(app, 1, path="/own", client=("192.0.2.99", 1))]
        got += [r for r, _ in await get_many(app, 1, client=None)]  # no peer address: no key
        await client.close()
        return got, decisions

    got, decisions = asyncio.run(run())
    assert [r.status_code for r in got] == [200, 429, 200, 200]
    assert "ratelimit" not in got[0].headers and got[0].headers["x-ratelimit-remaining"] == "0"
    assert got[1].text == "slow down\n" and got[1].headers["retry-after"] == "60"
    assert got[1].headers["x-ratelimit-limit"] == "2"
    assert got[2].headers["ratelimit"] == "mine"  # the application's own field wins
    assert "x-ratelimit-limit" not in got[3].headers
    assert decisions == [True, False, True]


def test_fail_open_and_closed_on_a_closed_port(closed_port):
    for fail_closed in (False, True):
        errors = []

        async def run():
            lim = AsyncLimiter(redis.asyncio.Redis(host="127.0.0.1", port=closed_port), EXAMPLE)
            app = app_with(lim, fail_closed=fail_closed, legacy_headers=True,
                           on_error=lambda req, e: errors.append(type(e)))
            return await get_many(app, 10)

        got = asyncio.run(run())
        want = 503 if fail_closed else 200
        assert [r.status_code for r, _ in got] == [want] * 10
        assert max(took for _, took in got) < 0.5, [took for _, took in got]
        assert sum(took for _, took in got) < 0.5
        for r, _ in got:
            assert "ratelimit" not in r.headers and "x-ratelimit-limit" not in r.headers
            if fail_closed:
                assert r.headers["content-type"] == "application/problem+json"
                assert json.loads(r.content) == {"type": "about:blank", "title": "Service Unavailable", "status": 503,
                                                 "detail": "The rate limiter is unavailable."}
            else:
                assert r.text == "hello\n"
        # Refused at once: the breaker opened on the first failure.
        assert errors[0] is redis.exceptions.ConnectionError and set(errors[1:]) == {CircuitOpenError}


def test_starlette_test_client_by_header(server, uniq):
    client = redis.asyncio.Redis(host=server[0], port=server[1])
    lim = AsyncLimiter(client, [Policy("p", 1, 1, 60)], key_prefix=uniq + ":")
    with TestClient(app_with(lim, key=by_header("X-Api-Key"))) as c:
        codes = [c.get("/hello", headers={"X-Api-Key": "abc"}).status_code for _ in range(3)]
        other = c.get("/hello", headers={"X-Api-Key": "def"})
        anonymous = [c.get("/hello") for _ in range(3)]
    assert codes == [200, 200, 429] and other.status_code == 200
    assert [r.status_code for r in anonymous] == [200] * 3 and "ratelimit" not in anonymous[0].headers


def test_trusted_proxy(server, uniq):
    async def run():
        client = redis.asyncio.Redis(host=server[0], port=server[1])
        lim = AsyncLimiter(client, [Policy("p", 0, 1, 60)], key_prefix=uniq + ":")
        app = app_with(lim, key=by_ip("10.0.0.0/8"))
        a = await get_many(app, 2, client=("10.0.0.1", 80), headers={"X-Forwarded-For": "198.51.100.7"})
        b = await get_many(app, 1, client=("10.0.0.1", 80), headers={"X-Forwarded-For": "198.51.100.8"})
        await client.close()
        return [r.status_code for r, _ in a + b], lim

    codes, lim = asyncio.run(run())
    assert codes == [200, 429, 200]  # two clients behind one proxy
