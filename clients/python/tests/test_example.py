"""examples/python/app.py, run as its users run it (uvicorn, a real
cellserver): 20 allowed then 429, fail open and closed on a closed port
within 0.5 s, its counters, and a flood that the deny cache absorbs."""

import http.client
import json
import os
import random
import subprocess
import sys
import threading
import time

import pytest

APP = os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples", "python", "app.py")


class Example:
    """One app.py process on a free port."""

    def __init__(self, cellserver, *flags):
        self.proc = subprocess.Popen(
            [sys.executable, APP, "--listen", "127.0.0.1:0", "--cellserver", cellserver, *flags],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        line = self.proc.stdout.readline()  # blocks until ready, or EOF if it exits
        if not line.startswith("listening on "):
            self.proc.kill()
            raise AssertionError(f"app.py printed {line!r}, stderr: {self.proc.stderr.read()}")
        self.port = int(line.rsplit(":", 1)[1])

    def conn(self, source):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=10, source_address=(source, 0))

    def get(self, conn, path="/hello"):
        t = time.monotonic()
        conn.request("GET", path)
        r = conn.getresponse()
        body = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, body, time.monotonic() - t

    def vars(self):
        c = self.conn("127.0.0.1")
        _, _, body, _ = self.get(c, "/debug/vars")
        c.close()
        return json.loads(body)["limiter"]

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def client_address():
    """A loopback source address of its own (all of 127/8 is local), so
    that each test is a client IP of its own on the shared server."""
    return f"127.{random.randint(1, 254)}.{random.randint(1, 254)}.{random.randint(1, 254)}"


@pytest.fixture
def example(server):
    e = Example(f"{server[0]}:{server[1]}")
    yield e
    e.close()


def test_twenty_then_429(example):
    c = example.conn(client_address())
    start = time.monotonic()
    status, h, body, _ = example.get(c)
    assert (status, body) == (200, b"hello\n")
    assert h["ratelimit-policy"] == '"burst";q=20;w=2, "daily";q=10000;w=86400'
    assert h["ratelimit"] == '"burst";r=19;t=1, "daily";r=9999;t=9'
    assert (h["x-ratelimit-limit"], h["x-ratelimit-remaining"], h["x-ratelimit-reset"]) == ("20", "19", "1")
    allowed = 1
    for _ in range(200):
        status, h, body, _ = example.get(c)
        if status != 200:
            break
        allowed += 1
    elapsed = time.monotonic() - start
    assert status == 429
    # 20 at once, and what refilled (10 a second) while they were sent.
    assert 20 <= allowed <= 20 + 10 * elapsed + 1, (allowed, elapsed)
    assert h["retry-after"] == "1" and h["content-type"] == "application/problem+json"
    assert h["ratelimit"].startswith('"burst";r=0;t=2, "daily";r=')
    assert (h["x-ratelimit-limit"], h["x-ratelimit-remaining"], h["x-ratelimit-reset"]) == ("20", "0", "2")
    assert json.loads(body) == {
        "type": "https://iana.org/assignments/http-problem-types#quota-exceeded", "title": "Quota Exceeded",
        "status": 429, "detail": "Too many requests: retry in 1 s.", "violated-policies": ["burst"],
    }
    c.close()


@pytest.mark.parametrize("flags, status", [((), 200), (("--fail-closed",), 503)])
def test_closed_port(closed_port, flags, status):
    e = Example(f"127.0.0.1:{closed_port}", *flags)
    try:
        c = e.conn(client_address())
        e.get(c, "/debug/vars")  # warm the web server up: what is timed is the limiter
        got = [e.get(c) for _ in range(10)]
        assert [g[0] for g in got] == [status] * 10
        assert max(g[3] for g in got) < 0.5, [g[3] for g in got]
        if status == 503:
            assert json.loads(got[0][2])["detail"] == "The rate limiter is unavailable."
        else:
            assert got[0][2] == b"hello\n" and "ratelimit" not in got[0][1]
        v = e.vars()
        assert v["errors"] == 10 and v["round_trips"] == 1  # the breaker opened at once
    finally:
        e.close()


def test_flood_is_absorbed(example):
    """6 connections on one key for 3 s: at most the limit admitted, and at
    most a quarter of the requests reach the server."""
    source = client_address()
    before = example.vars()
    codes = []
    lock = threading.Lock()
    stop = time.monotonic() + 3.0
    start = time.monotonic()

    def flood():
        c = example.conn(source)
        mine = []
        while time.monotonic() < stop:
            mine.append(example.get(c)[0])
        c.close()
        with lock:
            codes.extend(mine)

    threads = [threading.Thread(target=flood) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    after = example.vars()
    admitted, requests = codes.count(200), len(codes)
    round_trips = after["round_trips"] - before["round_trips"]
    print(f"flood: {requests} requests in {elapsed:.1f} s, {admitted} admitted, {round_trips} round trips")
    assert set(codes) <= {200, 429} and requests > 40
    assert admitted <= 20 + 10 * elapsed, (admitted, elapsed)
    # What reaches the server is what is admitted, plus, per deny-cache
    # period (1 s), a refusal on each of the 6 connections at most.
    refusals = round_trips - admitted
    assert refusals <= 6 * (elapsed + 2), (round_trips, admitted)
    assert after["local"] - before["local"] == requests - round_trips
    # The bound: at most a quarter of the requests reach the server.
    # It holds once the flood outnumbers four times what the limit admits,
    # which a machine too loaded to serve 50 requests a second does not reach.
    if requests >= 4 * (20 + 10 * elapsed) + 4 * refusals:
        assert round_trips <= requests / 4, (round_trips, requests)
