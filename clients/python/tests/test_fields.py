"""The shared field table (clients/conformance/fields.json), the one truth
the Go, Python and Node front doors all pass: each case's policies,
quantity and key give the command sent; the server's reply given gives the
status, the fields (and those absent) and the 429 body; cached_ms asks for
the same request answered by the deny cache that much later. No server: a
client that records the command and answers the case's reply."""

import json
import os

import pytest

from cellserver_limit import Algorithm, BadReplyError, Limiter, Policy
from cellserver_limit._http import Options, decided

TABLE = os.path.join(os.path.dirname(__file__), "..", "..", "conformance", "fields.json")


def load():
    with open(TABLE) as f:
        table = json.load(f)
    return table["cases"]


class Replay:
    """A redis-py stand-in for one case: records the command, answers the
    reply (a RESP simple string arrives as bytes, as from redis-py)."""

    def __init__(self, reply):
        self.reply = reply.encode() if isinstance(reply, str) else reply
        self.commands = []

    def execute_command(self, *args):
        self.commands.append([a.decode("utf-8", "surrogateescape") if isinstance(a, bytes) else str(a) for a in args])
        return self.reply


class Clock:
    ns = 10**12

    def __call__(self):
        return self.ns


@pytest.mark.parametrize("case", load(), ids=lambda c: c["name"])
def test_fields(case):
    policies = [
        Policy(p["name"], p.get("burst", 0), p["count"], p["period_ms"] / 1000, Algorithm(p["algorithm"]))
        for p in case["policies"]
    ]
    client, clock = Replay(case["reply"]), Clock()
    lim = Limiter(client, policies, clock=clock, deny_cache=30)
    lim._bounded = True  # the replay answers at once: no worker thread
    expect = case["expect"]
    if "error" in expect:
        assert expect["error"] == "bad_reply"
        with pytest.raises(BadReplyError):
            lim.allow(case["key"], case["quantity"])
        assert client.commands == [expect["command"]]
        return
    d = lim.allow(case["key"], case["quantity"])
    assert client.commands == [expect["command"]]
    if "cached_ms" in case:
        clock.ns += case["cached_ms"] * 1_000_000
        d = lim.allow(case["key"], case["quantity"])
        assert d.local and len(client.commands) == 1, "not answered by the deny cache"
    opts = Options(None, False, case["legacy"], True, None, None, None)
    answer = decided(opts, None, d, lim._core.policies)
    assert (answer.status or 200) == expect["status"]
    fields = dict(answer.fields)
    for name, value in expect["headers"].items():
        assert fields.get(name) == value, name
    for name in expect["absent"]:
        assert name not in fields, name
    if "body" in expect:
        assert json.loads(answer.body) == expect["body"]
        # Byte for byte as Go's encoding/json writes it.
        assert answer.body == json.dumps(expect["body"], separators=(",", ":")).encode()
    else:
        assert answer.status == 0
