"""Policies, keys and replies without a server: the rules httplimit holds
(httplimit/policy.go, key.go, limiter.go), checked value by value."""

import datetime
import ipaddress

import pytest

from cellserver_limit import (
    Algorithm,
    BadReplyError,
    Decision,
    InvalidPolicyError,
    Policy,
    Request,
    Result,
    by_header,
    by_ip,
    by_user,
    compile_all,
    first_key,
    hash_tag,
    parse_reply,
)
from cellserver_limit._policy import compile_policy

A = Algorithm


@pytest.mark.parametrize("policy, command, params, suffix, item", [
    (Policy("burst", 19, 10, 1), "CL.THROTTLE", (19, 10, 1), (), '"burst";q=20;w=2'),
    (Policy("daily", 9999, 10000, 86400), "CL.THROTTLE", (9999, 10000, 86400), (), '"daily";q=10000;w=86400'),
    # The README's CL.THROTTLE user:1 15 30 60: 16 at once, 16 per 32 s.
    (Policy("u", 15, 30, datetime.timedelta(minutes=1)), "CL.THROTTLE", (15, 30, 60), (), '"u";q=16;w=32'),
    (Policy("tb", 5, 1, 1, A.TOKEN_BUCKET), "TB.TAKE", (5, 1, "1000ms"), (), '"tb";q=5;w=5'),
    (Policy("tbi", 10, 4, 4, A.TOKEN_BUCKET_INTERVAL), "TB.TAKE", (10, 4, "4000ms"), ("INTERVAL",), '"tbi";q=10;w=12'),
    (Policy("lb", 40, 2, 1, A.LEAKY_BUCKET), "LB.ADD", (40, 2, "1000ms"), (), '"lb";q=40;w=20'),
    (Policy("fw", 0, 50, 1.5, A.FIXED_WINDOW), "FW.INCR", (50, "1500ms"), (), '"fw";q=50;w=2'),
    (Policy("sw", 0, 5000, 3600, A.SLIDING_WINDOW), "SW.INCR", (5000, "3600000ms"), (), '"sw";q=5000;w=3600'),
    (Policy("sl", 0, 10, 0.001, A.SLIDING_LOG), "SL.ADD", (10, "1ms"), (), '"sl";q=10;w=1'),
    # w at least 1 s, rounded up; q clamped to 15 digits.
    (Policy("fast", 1, 1000, 0.001, A.TOKEN_BUCKET), "TB.TAKE", (1, 1000, "1ms"), (), '"fast";q=1;w=1'),
    (Policy("big", 1 << 40, 1, 3660 * 86400, A.TOKEN_BUCKET), "TB.TAKE", (1 << 40, 1, "316224000000ms"), (),
     '"big";q=1099511627776;w=999999999999999'),
    (Policy("s", 0, 1, 1.1, "fixed-window"), "FW.INCR", (1, "1100ms"), (), '"s";q=1;w=2'),
])
def test_compile(policy, command, params, suffix, item):
    c = compile_policy(policy)
    assert (c.command, c.params, c.suffix, c.item) == (command, params, suffix, item)


@pytest.mark.parametrize("policies, says", [
    ([], "no policy"),
    ([Policy("", 1, 1, 1)], "name ''"),
    ([Policy("a" * 65, 1, 1, 1)], "1 to 64"),
    ([Policy("a{b}", 1, 1, 1)], "ASCII letters"),
    ([Policy("é", 1, 1, 1)], "ASCII letters"),
    ([Policy("a", -1, 1, 1)], "burst -1 out of range"),
    ([Policy("a", 1 << 41, 1, 1)], "burst"),
    ([Policy("a", 1, 0, 1)], "count 0 out of range"),
    ([Policy("a", 1, 1, 0)], "period 0 ms out of range"),
    ([Policy("a", 1, 1, 3661 * 86400)], "out of range"),
    ([Policy("a", 1, 1, 1.5)], "whole number of seconds (CL.THROTTLE)"),
    ([Policy("a", 1, 1, 0.0005, A.TOKEN_BUCKET)], "whole number of milliseconds"),
    ([Policy("a", 1, 1, datetime.timedelta(microseconds=1500), A.FIXED_WINDOW)], "whole number of milliseconds"),
    ([Policy("a", 1, 1, "1s")], "timedelta or a number of seconds"),
    ([Policy("a", 1.5, 1, 1)], "burst 1.5 must be an integer"),
    ([Policy("a", 0, 1, 1, A.TOKEN_BUCKET)], "capacity (burst) of at least 1"),
    ([Policy("a", 1, 1, 1, A.FIXED_WINDOW)], "takes no burst"),
    ([Policy("a", 1, 1, 1, "cuckoo")], "unknown algorithm"),
    ([Policy("a", 1, 1, 1), Policy("a", 1, 1, 2)], "used twice"),
    ([Policy("a", 1, 1, 1), Policy("b", 0, 1, 1, A.FIXED_WINDOW)], "GCRA policies only"),
])
def test_invalid_policies(policies, says):
    with pytest.raises(InvalidPolicyError) as e:
        compile_all(policies)
    assert says in str(e.value)


def test_hash_tag():
    digest = "=" + "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"  # SHA-256 of "", base64url
    long = "k" * 129
    assert [hash_tag(k) for k in ("ip:192.0.2.1", "k" * 128)] == ["ip:192.0.2.1", "k" * 128]
    assert hash_tag("") == digest
    for odd in (long, "a{b", "a}b", "=x"):
        t = hash_tag(odd)
        assert t.startswith("=") and len(t) == 44 and "{" not in t and "}" not in t, odd
    assert hash_tag("=x") != hash_tag("x")
    # 128 bytes, not characters: 43 three-byte characters are 129 bytes.
    assert hash_tag("€" * 42) == "€" * 42 and hash_tag("€" * 43).startswith("=")


def req(remote, xff=(), **headers):
    hs = [("x-forwarded-for", v) for v in xff] + [(k.replace("_", "-"), v) for k, v in headers.items()]
    return Request(remote, hs)


PROXIES = ("10.0.0.0/8", "fd00::/8")


@pytest.mark.parametrize("remote, xff, trusted, want", [
    ("192.0.2.1", [], (), "ip:192.0.2.1"),
    ("192.0.2.1", ["198.51.100.7"], (), "ip:192.0.2.1"),  # ignored without trusted proxies
    ("192.0.2.1", ["198.51.100.7"], PROXIES, "ip:192.0.2.1"),  # ignored from an untrusted peer
    ("10.0.0.1", ["198.51.100.7"], PROXIES, "ip:198.51.100.7"),
    ("10.0.0.1", ["203.0.113.9, 198.51.100.7, 10.1.1.1"], PROXIES, "ip:198.51.100.7"),
    ("10.0.0.1", ["1.2.3.4, 198.51.100.7"], PROXIES, "ip:198.51.100.7"),  # a spoofed left part is not used
    ("10.0.0.1", ["203.0.113.9", "10.2.2.2,  "], PROXIES, "ip:203.0.113.9"),  # last field line first
    ("10.0.0.1", ["10.3.3.3, 10.2.2.2"], PROXIES, "ip:10.3.3.3"),  # all trusted: left-most
    ("10.0.0.1", [], PROXIES, "ip:10.0.0.1"),
    ("10.0.0.1", ["198.51.100.7, unknown, 10.2.2.2"], PROXIES, "ip:10.2.2.2"),  # garbage stops the walk
    ("10.0.0.1", ["198.51.100.7:5555"], PROXIES, "ip:198.51.100.7"),
    ("2001:db8:1:2:3:4:5:6", [], (), "ip:2001:db8:1:2::/64"),
    ("fd00::1", ["[2001:db8:9:9::1]:1"], PROXIES, "ip:2001:db8:9:9::/64"),
    ("::ffff:192.0.2.1", [], (), "ip:192.0.2.1"),
    ("10.0.0.1", ["198.51.100.7"], ("::ffff:10.0.0.0/104",), "ip:198.51.100.7"),
    ("fe80::1%eth0", [], (), "ip:fe80::/64"),
    (None, [], (), None),  # a unix socket
    ("testclient", [], (), None),
])
def test_by_ip(remote, xff, trusted, want):
    assert by_ip(*trusted)(req(remote, xff)) == want
    assert by_ip(*[ipaddress.ip_network(p) for p in trusted])(req(remote, xff)) == want


def test_key_helpers():
    key = first_key(by_user(lambda r: r.raw), by_header("X-Api-Key"), by_ip())
    for user, api_key, want in [("42", "k", "user:42"), (None, " k-1 ", "x-api-key:k-1"), (None, "", "ip:192.0.2.1")]:
        r = Request("192.0.2.1", [("x-api-key", api_key)] if api_key else [], raw=user)
        assert key(r) == want
    assert first_key(by_header("X-Api-Key"))(Request("192.0.2.1", [])) is None


GCRA2 = compile_all([Policy("second", 1, 1, 1), Policy("minute", 9, 10, 60)])
TB = compile_all([Policy("tb", 2, 1, 10, A.TOKEN_BUCKET)])


def test_parse_reply():
    d = parse_reply([[1, 2, 0, 1, 2], [0, 10, 8, -1, 12]], GCRA2)
    assert d == Decision(False, (Result("second", True, 2, 0, 1000, 2000), Result("minute", False, 10, 8, -1, 12000)))
    assert (d.retry_after_ms(), d.binding(), d.violated()) == (1000, 0, ["second"])
    d = parse_reply([0, 2, 1, -1, 10000, 0], TB)  # a sixth field (LB.ADD's wait) is allowed
    assert d == Decision(True, (Result("tb", False, 2, 1, -1, 10000),))
    assert (d.retry_after_ms(), d.binding(), d.violated()) == (None, 0, [])


@pytest.mark.parametrize("reply, policies", [
    (b"OK", TB), ([0, 2, 1, -1], TB), ([0, 2, 1, -1, b"5"], TB), ([True, 2, 1, -1, 5], TB),
    ([2, 2, 1, -1, 5], TB), ([0, 2, 3, -1, 5], TB), ([0, -1, 0, -1, 5], TB), ([1, 2, 0, -2, 5], TB),
    ([0, 2, 1, 5, 5], TB),  # allowed with a retry_after
    ([0, 2, 1, -1, 1 << 62], TB),  # a time that overflows a Go duration
    ([0, 2, 1, -1, 1 << 40], GCRA2), ([[0, 2, 1, -1, 1]], GCRA2), ([[0, 2, 1, -1, 1], None], GCRA2),
])
def test_bad_replies(reply, policies):
    with pytest.raises(BadReplyError):
        parse_reply(reply, policies)


def test_binding():
    r = lambda name, limited, remaining, retry, reset: Result(name, limited, 10, remaining, retry, reset)  # noqa: E731
    cases = [
        (True, [r("a", False, 5, -1, 10), r("b", False, 3, -1, 10)], 1),
        (True, [r("a", False, 3, -1, 10), r("b", False, 3, -1, 20)], 1),  # longest reset breaks the tie
        (True, [r("a", False, 3, -1, 20), r("b", False, 3, -1, 20)], 0),  # earlier wins
        (False, [r("a", False, 0, -1, 10), r("b", True, 3, 500, 10)], 1),  # a refusing policy
        (False, [r("a", True, 0, 900, 10), r("b", True, 0, 500, 10)], 0),  # the longest retry_after
        (False, [r("a", True, 0, 900, 10), r("b", True, 0, -1, 10)], 1),  # one that never allows
        (False, [r("a", True, 0, -1, 10), r("b", True, 0, 900, 10)], 0),
    ]
    for allowed, results, want in cases:
        assert Decision(allowed, tuple(results)).binding() == want, results
    assert Decision(True, ()).binding() == -1
