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


class Silent:
    """A loopback listener that accepts connections and never answers: a
    server that hangs."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]

    def close(self):
        self.sock.close()


@pytest.fixture
def silent():
    s = Silent()
    yield s
    s.close()


class Proxy:
    """A loopback TCP proxy in front of the server under test that can be
    taken down (its port then refuses connections, and the connections it
    carried are cut) and brought back on the same port."""

    def __init__(self, target):
        import threading

        self.target = target
        self._threading = threading
        self._conns = []
        self._lock = threading.Lock()
        self.sock = None
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self.up()

    def up(self):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", self.port))
        s.listen(64)
        self.sock = s
        self._threading.Thread(target=self._accept, args=(s,), daemon=True).start()

    def down(self):
        s, self.sock = self.sock, None
        if s is not None:
            s.shutdown(socket.SHUT_RDWR)
            s.close()
        with self._lock:
            conns, self._conns = self._conns, []
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()

    def _accept(self, s):
        while True:
            try:
                c, _ = s.accept()
            except OSError:
                return
            try:
                u = socket.create_connection(self.target, timeout=5)
            except OSError:
                c.close()
                continue
            u.settimeout(None)
            with self._lock:
                self._conns += [c, u]
            for a, b in ((c, u), (u, c)):
                self._threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


@pytest.fixture
def proxy(server):
    p = Proxy(server)
    yield p
    p.down()
