"""The deny cache against the real server: a refused (key, quantity) is
answered locally, with fields aged by the time passed, until min(its
retry_after, the cache's max) passes; nothing else is."""

import asyncio

import redis
import redis.asyncio

from cellserver_limit import AsyncLimiter, Limiter, Policy, decision_fields

# 2 at once, then 1 per 10 s: the third request is refused for 10 s.
SLOW = [Policy("p", 1, 1, 10)]


def limiter(server, uniq, clock, **kw):
    client = redis.Redis(host=server[0], port=server[1], socket_timeout=0.1)
    return Limiter(client, SLOW, key_prefix=uniq + ":", clock=clock, **kw)


def fields(lim, d):
    return dict(decision_fields(d, lim._core.policies, legacy=True))


def test_refusal_is_answered_locally_with_aged_fields(server, uniq, clock):
    lim = limiter(server, uniq, clock, deny_cache=30)
    assert lim.allow("k").allowed and lim.allow("k").allowed
    refused = lim.allow("k")
    assert not refused.allowed and not refused.local
    assert refused.results[0].retry_after_ms == 10_000 and refused.results[0].reset_after_ms == 20_000
    assert fields(lim, refused) == {
        "RateLimit-Policy": '"p";q=2;w=20', "RateLimit": '"p";r=0;t=20', "Retry-After": "10",
        "X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "20",
    }
    assert lim.counters() == {"decisions": 3, "local": 0, "round_trips": 3, "errors": 0}
    # Answered locally, the times counting down and rounded up, remaining unchanged.
    for advance, retry, reset in [(0, "10", "20"), (2.5, "8", "18"), (7.0, "1", "11"), (0.499, "1", "11")]:
        clock.advance(advance)
        d = lim.allow("k")
        assert d.local and not d.allowed and d.results[0].remaining == 0
        f = fields(lim, d)
        assert (f["Retry-After"], f["X-RateLimit-Reset"], f["RateLimit"]) == (retry, reset, f'"p";r=0;t={reset}')
    assert lim.counters() == {"decisions": 7, "local": 4, "round_trips": 3, "errors": 0}
    # The retry_after has passed: the server decides again (and, its clock
    # being where it was, refuses again).
    clock.advance(0.001)
    d = lim.allow("k")
    assert not d.local and not d.allowed
    assert lim.counters()["round_trips"] == 4


def test_max_caps_the_time_and_zero_turns_it_off(server, uniq, clock):
    lim = limiter(server, uniq, clock)  # the default max: 1 s
    for _ in range(3):
        lim.allow("k")
    clock.advance(0.5)
    assert lim.allow("k").local
    clock.advance(0.5)
    assert not lim.allow("k").local  # 1 s passed although retry_after is 10 s
    assert lim.counters()["round_trips"] == 4

    off = limiter(server, uniq, clock, deny_cache=0)
    for _ in range(5):
        assert not off.allow("k2").local
    assert off.counters() == {"decisions": 5, "local": 0, "round_trips": 5, "errors": 0}


def test_keyed_by_key_and_quantity(server, uniq, clock):
    lim = limiter(server, uniq, clock, deny_cache=30, deny_cache_size=2)
    never = lim.allow("k", 3)  # larger than the whole quota: refused for ever
    assert never.results[0].retry_after_ms == -1
    again = lim.allow("k", 3)
    assert again.local and again.retry_after_ms() is None  # cached (for the max) and still "never"
    assert "Retry-After" not in fields(lim, again)
    # Another quantity or key goes to the server.
    assert lim.allow("k", 1).allowed and not lim.allow("other", 3).local
    # The bound: a third refused (key, quantity) drops the oldest.
    lim.allow("third", 3)
    assert not lim.allow("k", 3).local
    assert lim.allow("third", 3).local


def test_clear(server, uniq, clock):
    lim = limiter(server, uniq, clock, deny_cache=30)
    lim.allow("k", 3)
    assert lim.allow("k", 3).local
    lim.clear_deny_cache()
    assert not lim.allow("k", 3).local


def test_async_deny_cache(server, uniq, clock):
    async def run():
        client = redis.asyncio.Redis(host=server[0], port=server[1])
        lim = AsyncLimiter(client, SLOW, key_prefix=uniq + ":", clock=clock)
        got = [await lim.allow("k") for _ in range(6)]
        clock.advance(1)
        got.append(await lim.allow("k"))
        await client.close()
        return got, lim.counters()

    got, counters = asyncio.run(run())
    assert [d.allowed for d in got] == [True, True, False, False, False, False, False]
    assert [d.local for d in got] == [False, False, False, True, True, True, False]
    assert counters == {"decisions": 7, "local": 3, "round_trips": 4, "errors": 0}
