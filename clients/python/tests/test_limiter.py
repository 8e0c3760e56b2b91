"""Limiter and AsyncLimiter against the real server: the commands, keys and
decisions of httplimit, the timeout and the circuit breaker."""

import asyncio
import time

import pytest
import redis
import redis.asyncio

from cellserver_limit import (
    Algorithm,
    AsyncLimiter,
    CircuitOpenError,
    Decision,
    DecisionTimeoutError,
    InvalidOptionError,
    InvalidQuantityError,
    Limiter,
    Policy,
    Result,
)

A = Algorithm
PAIR = [Policy("second", 1, 1, 1), Policy("minute", 9, 10, 60)]

# docs/http.md's worked example: three requests in one second.
WORKED = [
    Decision(True, (Result("second", False, 2, 1, -1, 1000), Result("minute", False, 10, 9, -1, 6000))),
    Decision(True, (Result("second", False, 2, 0, -1, 2000), Result("minute", False, 10, 8, -1, 12000))),
    Decision(False, (Result("second", True, 2, 0, 1000, 2000), Result("minute", False, 10, 8, -1, 12000))),
]


def sync_client(server, **kw):
    kw.setdefault("socket_timeout", 0.1)
    return redis.Redis(host=server[0], port=server[1], **kw)


def test_sync_pair_is_one_atomic_decision(server, rdb, uniq):
    lim = Limiter(sync_client(server), PAIR, key_prefix=uniq + ":", deny_cache=0)
    got = [lim.allow("ip:192.0.2.1") for _ in range(3)]
    assert got == WORKED
    # The refused request consumed nothing from minute: a peek still sees 8.
    peek = lim.allow("ip:192.0.2.1", 0)
    assert peek.results[1].remaining == 8
    for p in ("second", "minute"):
        k = lim.server_key(p, "ip:192.0.2.1")
        assert k == f"{uniq}:{p}:{{ip:192.0.2.1}}"
        assert rdb.type(k) == b"gcra"
    assert lim.counters() == {"decisions": 4, "local": 0, "round_trips": 4, "errors": 0}


def test_async_pair_is_one_atomic_decision(server, uniq):
    async def run():
        client = redis.asyncio.Redis(host=server[0], port=server[1])
        lim = AsyncLimiter(client, PAIR, key_prefix=uniq + ":", deny_cache=0)
        got = [await lim.allow("ip:192.0.2.1") for _ in range(3)]
        await client.close()
        return got, lim.counters()

    got, counters = asyncio.run(run())
    assert got == WORKED
    assert counters == {"decisions": 3, "local": 0, "round_trips": 3, "errors": 0}


@pytest.mark.parametrize("policy, kind, first", [
    (Policy("p", 2, 1, 10, A.TOKEN_BUCKET), b"token-bucket", Result("p", False, 2, 1, -1, 10000)),
    (Policy("p", 2, 1, 10, A.TOKEN_BUCKET_INTERVAL), b"token-bucket", Result("p", False, 2, 1, -1, 10000)),
    (Policy("p", 2, 1, 10, A.LEAKY_BUCKET), b"leaky-bucket", Result("p", False, 2, 1, -1, 10000)),
    (Policy("p", 0, 2, 3600, A.SLIDING_LOG), b"sliding-log", Result("p", False, 2, 1, -1, 3600000)),
    (Policy("p", 0, 2, 3600, A.SLIDING_WINDOW), b"sliding-window", None),
    (Policy("p", 0, 2, 3600, A.FIXED_WINDOW), b"fixed-window", None),
])
def test_one_command_per_algorithm(server, rdb, uniq, policy, kind, first):
    lim = Limiter(sync_client(server), [policy], key_prefix=uniq + ":", deny_cache=0)
    got = [lim.allow("k") for _ in range(3)]
    assert [d.allowed for d in got] == [True, True, False]
    assert rdb.type(lim.server_key("p", "k")) == kind
    if first is not None:  # times of the windows depend on the clock
        r = got[0].results[0]
        assert r.policy == first.policy and r.limit == first.limit and r.remaining == first.remaining
        assert r.retry_after_ms == -1 and first.reset_after_ms - 2000 <= r.reset_after_ms <= first.reset_after_ms
    refused = got[2].results[0]
    assert refused.limited and refused.remaining == 0 and refused.retry_after_ms > 0


def test_odd_keys_are_hashed(server, rdb, uniq):
    lim = Limiter(sync_client(server), [Policy("p", 1, 1, 1)], key_prefix=uniq + ":")
    for key in ("", "a{b}", "=x", "k" * 200, "x-api-key:\udcff\udcfe"):
        lim.allow(key)
        sk = lim.server_key("p", key)
        assert sk.startswith(f"{uniq}:p:{{=") and len(sk) == len(f"{uniq}:p:{{}}") + 44 or key.startswith("x-api")
        assert rdb.exists(sk.encode("utf-8", "surrogateescape")) == 1, key
    # Raw bytes of a header reach the server as they are.
    assert rdb.exists(f"{uniq}:p:{{x-api-key:".encode() + b"\xff\xfe}") == 1


def test_quantities(server, uniq):
    lim = Limiter(sync_client(server), [Policy("p", 4, 1, 10)], key_prefix=uniq + ":", deny_cache=0)
    assert lim.allow("k", 0).results[0].remaining == 5  # a peek consumes nothing
    assert lim.allow("k", 5).allowed
    never = lim.allow("k", 6)  # more than the whole quota
    assert not never.allowed and never.results[0].retry_after_ms == -1 and never.retry_after_ms() is None
    for bad in (-1, 1 << 41, 1.5, True):
        with pytest.raises(InvalidQuantityError):
            lim.allow("k", bad)
    # A bad quantity is the caller's error, not a decision nor a failure.
    assert lim.counters() == {"decisions": 3, "local": 0, "round_trips": 3, "errors": 0}


def test_error_reply_raises_and_keeps_breaker_closed(server, rdb, uniq):
    lim = Limiter(sync_client(server), [Policy("p", 1, 1, 1)], key_prefix=uniq + ":", breaker_failures=1)
    rdb.execute_command("FW.INCR", lim.server_key("p", "k"), 5, "1h", 1)
    for _ in range(3):
        with pytest.raises(redis.exceptions.ResponseError, match="WRONGTYPE"):
            lim.allow("k")
    assert not lim.breaker_open
    assert lim.counters() == {"decisions": 3, "local": 0, "round_trips": 3, "errors": 3}


def test_wrong_client_kind(server):
    with pytest.raises(InvalidOptionError, match="AsyncLimiter"):
        Limiter(redis.asyncio.Redis(host=server[0], port=server[1]), PAIR)
    with pytest.raises(InvalidOptionError, match="use Limiter"):
        AsyncLimiter(sync_client(server), PAIR)
    for bad in ({"timeout": 0}, {"key_prefix": "a{"}, {"deny_cache": -1}, {"breaker_failures": 0}, {"breaker_cool_down": 0}):
        with pytest.raises(InvalidOptionError):
            Limiter(sync_client(server), PAIR, **bad)


# A server that accepts and never answers: every decision ends at the
# timeout, by the client's own socket timeout, by the worker the limiter
# stops waiting for, or by cancelling the asyncio call; after 5 of them the
# breaker opens and decisions fail at once.
@pytest.mark.parametrize("kind", ["socket timeout", "worker", "asyncio"])
def test_timeout_then_breaker(silent, kind, clock):
    policies = [Policy("p", 1, 1, 1)]
    if kind == "asyncio":
        client = redis.asyncio.Redis(host="127.0.0.1", port=silent.port)
        lim = AsyncLimiter(client, policies, clock=clock)

        def allow():
            return asyncio.run(lim.allow("k"))
    else:
        client = redis.Redis(host="127.0.0.1", port=silent.port, socket_timeout=0.1 if kind == "socket timeout" else None)
        lim = Limiter(client, policies, clock=clock)
        assert lim._bounded == (kind == "socket timeout")
        allow = lambda: lim.allow("k")  # noqa: E731
    for i in range(5):
        t = time.monotonic()
        with pytest.raises(DecisionTimeoutError):
            allow()
        took = time.monotonic() - t
        assert 0.09 <= took < 0.5, (i, took)
    assert lim.breaker_open
    t = time.monotonic()
    with pytest.raises(CircuitOpenError):
        allow()
    assert time.monotonic() - t < 0.05
    assert lim.counters() == {"decisions": 6, "local": 0, "round_trips": 5, "errors": 6}


def test_refused_connection_opens_breaker_at_once(proxy, uniq, clock):
    lim = Limiter(redis.Redis(host="127.0.0.1", port=proxy.port, socket_timeout=0.1), [Policy("p", 9, 10, 1)],
                  key_prefix=uniq + ":", clock=clock)
    assert lim.allow("k").allowed
    proxy.down()
    for _ in range(2):  # the pooled connection is cut; the next one is refused
        t = time.monotonic()
        with pytest.raises((redis.exceptions.ConnectionError, CircuitOpenError)):
            lim.allow("k")
        assert time.monotonic() - t < 0.05
    assert lim.breaker_open
    with pytest.raises(CircuitOpenError):
        lim.allow("k")
    # The cool-down passes: one probe, refused again, keeps it open.
    clock.advance(1.0)
    with pytest.raises(redis.exceptions.ConnectionError):
        lim.allow("k")
    with pytest.raises(CircuitOpenError):
        lim.allow("k")
    # The server is back: the next probe closes it.
    proxy.up()
    clock.advance(1.0)
    assert lim.allow("k").allowed
    assert not lim.breaker_open
    assert lim.allow("k").allowed


def test_async_refused_connection_opens_breaker_at_once(closed_port):
    async def run():
        lim = AsyncLimiter(redis.asyncio.Redis(host="127.0.0.1", port=closed_port), PAIR)
        t = time.monotonic()
        with pytest.raises(redis.exceptions.ConnectionError):
            await lim.allow("k")
        first = time.monotonic() - t
        with pytest.raises(CircuitOpenError):
            await lim.allow("k")
        return first, lim.breaker_open

    first, is_open = asyncio.run(run())
    assert first < 0.05 and is_open
