"""Shared fixtures: the cellserver under test (CELLSERVER_ADDR, HOST:PORT;
the tests that need it skip without it), fresh keys, and a closed port."""

import os
import socket
import uuid

import pytest
import redis


def _addr():
    a = os.environ.get("CELLSERVER_ADDR", "").strip()
    if not a:
        return None
    host, _, port = a.rpartition(":")
    return host or "127.0.0.1", int(port)


@pytest.fixture
def server():
    """(host, port) of the running cellserver; skips when CELLSERVER_ADDR is unset."""
    a = _addr()
    if a is None:
        pytest.skip("CELLSERVER_ADDR is not set: start cellserver and set it to its HOST:PORT")
    return a


@pytest.fixture
def rdb(server):
    """A plain redis-py client of the server under test, to look at keys."""
    c = redis.Redis(host=server[0], port=server[1], socket_timeout=5)
    yield c
    c.close()


@pytest.fixture
def uniq():
    """A string no other test (and no earlier run) uses, for keys."""
    return uuid.uuid4().hex[:12]


@pytest.fixture
def closed_port():
    """A loopback port nothing listens on: bound, then closed."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class FakeClock:
    """A monotonic clock in nanoseconds that moves only when told."""

    def __init__(self):
        self.ns = 1_000_000_000_000

    def __call__(self):
        return self.ns

    def advance(self, seconds):
        self.ns += int(seconds * 1e9)


@pytest.fixture
def clock():
    return FakeClock()
