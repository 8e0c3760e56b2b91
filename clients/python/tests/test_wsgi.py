"""The WSGI middleware in a Flask application, against the real server
(and a closed port)."""

import json
import re
import time

import flask
import redis

from cellserver_limit import CircuitOpenError, Limiter, Policy, by_ip
from cellserver_limit.wsgi import RateLimitMiddleware

from test_asgi import EXAMPLE, POLICY_FIELD, REFUSED_BODY


def flask_app(limiter, **kw):
    app = flask.Flask(__name__)

    @app.get("/hello")
    def hello():
        return "hello\n", 200, {"Content-Type": "text/plain; charset=utf-8"}

    app.wsgi_app = RateLimitMiddleware(app.wsgi_app, limiter, **kw)
    return app


def get_many(app, n, remote="192.0.2.8", headers=None):
    c = app.test_client()
    out = []
    for _ in range(n):
        t = time.monotonic()
        r = c.get("/hello", environ_base={"REMOTE_ADDR": remote}, headers=headers)
        out.append((r, time.monotonic() - t))
    return out


def test_twenty_then_429(server, uniq):
    lim = Limiter(redis.Redis(host=server[0], port=server[1], socket_timeout=0.1), EXAMPLE, key_prefix=uniq + ":")
    got = get_many(flask_app(lim, legacy_headers=True), 22)
    assert [r.status_code for r, _ in got] == [200] * 20 + [429, 429]
    first = got[0][0]
    assert first.text == "hello\n" and first.headers["RateLimit-Policy"] == POLICY_FIELD
    assert first.headers["RateLimit"] == '"burst";r=19;t=60, "daily";r=9999;t=9'
    assert first.headers["X-RateLimit-Remaining"] == "19" and "Retry-After" not in first.headers
    for r, _ in got[20:]:
        assert r.headers["Content-Type"] == "application/problem+json"
        assert r.headers["Retry-After"] == "60" and r.headers["X-RateLimit-Reset"] == "1200"
        assert re.fullmatch(r'"burst";r=0;t=1200, "daily";r=9980;t=17[23]', r.headers["RateLimit"])  # 20 × 8.64 s, less the time taken
        assert json.loads(r.data) == REFUSED_BODY
    assert lim.counters() == {"decisions": 22, "local": 1, "round_trips": 21, "errors": 0}


def test_fail_open_and_closed_on_a_closed_port(closed_port):
    for fail_closed in (False, True):
        errors = []
        lim = Limiter(redis.Redis(host="127.0.0.1", port=closed_port, socket_timeout=0.1), EXAMPLE)
        app = flask_app(lim, fail_closed=fail_closed, on_error=lambda req, e: errors.append(type(e)))
        got = get_many(app, 10)
        assert [r.status_code for r, _ in got] == [503 if fail_closed else 200] * 10
        assert max(took for _, took in got) < 0.5 and sum(took for _, took in got) < 0.5
        for r, _ in got:
            assert "RateLimit" not in r.headers
            if fail_closed:
                assert json.loads(r.data)["status"] == 503
        assert errors[0] is redis.exceptions.ConnectionError and set(errors[1:]) == {CircuitOpenError}


def test_trusted_proxy_and_threads(server, uniq):
    import concurrent.futures

    lim = Limiter(redis.Redis(host=server[0], port=server[1], socket_timeout=0.1), [Policy("p", 9, 1, 60)],
                  key_prefix=uniq + ":")
    app = flask_app(lim, key=by_ip("10.0.0.0/8"))

    def one(i):
        r = app.test_client().get("/hello", environ_base={"REMOTE_ADDR": "10.0.0.1"},
                                  headers={"X-Forwarded-For": "198.51.100.7, 10.9.9.9"})
        return r.status_code

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(one, range(40)))
    assert codes.count(200) == 10 and codes.count(429) == 30
    c = lim.counters()
    assert c["decisions"] == 40 and c["errors"] == 0 and c["round_trips"] + c["local"] == 40
