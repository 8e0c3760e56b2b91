"""docs/http.md's Python section, replayed: each python block runs against
the server under test (its address put in for 127.0.0.1:6379, a fresh key
for user:42), prints what the text block after it shows, and the
middlewares it builds answer as documented."""

import asyncio
import contextlib
import io
import os
import re

import httpx

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "http.md")


def section():
    with open(DOC) as f:
        text = f.read()
    start = text.index("\n## Python\n")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def blocks():
    """(code, expected output or None) for each python block, in order."""
    found = re.findall(r"```(\w+)\n(.*?)```", section(), re.S)
    out = []
    for i, (lang, body) in enumerate(found):
        if lang != "python":
            continue
        expect = found[i + 1][1] if i + 1 < len(found) and found[i + 1][0] == "text" else None
        out.append((body, expect))
    return out


def run(code, server, uniq):
    code = code.replace('host="127.0.0.1", port=6379', f'host="{server[0]}", port={server[1]}')
    code = code.replace("user:42", f"user:{uniq}")
    ns = {"__name__": "docs_http_md"}
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(code, DOC, "exec"), ns)
    return ns, buf.getvalue()


def test_the_section_has_its_blocks():
    assert len(blocks()) == 4


def test_limiters(server, uniq):
    for code, expect in blocks():
        if "Starlette(" in code or "flask" in code:
            continue
        _, printed = run(code, server, uniq)
        assert expect is not None
        assert printed == expect.replace("user:42", f"user:{uniq}")


def test_asgi(server, uniq):
    (code, _), = [b for b in blocks() if "Starlette(" in b[0]]
    ns, _ = run(code, server, uniq)

    async def get(n):
        transport = httpx.ASGITransport(app=ns["app"], client=("10.0.0.1", 80))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
            # A client of its own behind the trusted proxy 10.0.0.1.
            client = f"198.51.{int(uniq[:2], 16)}.{int(uniq[2:4], 16)}"
            return [await c.get("/hello", headers={"X-Forwarded-For": client}) for _ in range(n)]

    got = asyncio.run(get(2))
    assert [r.status_code for r in got] == [200, 200] and got[0].text == "hello\n"
    assert got[0].headers["ratelimit-policy"] == '"burst";q=20;w=2, "daily";q=10000;w=86400'
    assert got[1].headers["x-ratelimit-limit"] == "20"


def test_wsgi(server, uniq):
    (code, _), = [b for b in blocks() if "flask" in b[0]]
    ns, _ = run(code, server, uniq)
    c = ns["app"].test_client()
    ok = c.get("/hello", headers={"X-Api-Key": uniq})
    assert ok.status_code == 200 and ok.text == "hello\n"
    assert ok.headers["RateLimit"] == '"api";r=99;t=1' and ok.headers["RateLimit-Policy"] == '"api";q=100;w=60'
    assert c.get("/hello").headers.get("RateLimit") is None  # no key: unlimited


def test_wsgi_fails_closed(closed_port, uniq):
    (code, _), = [b for b in blocks() if "flask" in b[0]]
    ns, _ = run(code, ("127.0.0.1", closed_port), uniq)
    r = ns["app"].test_client().get("/hello", headers={"X-Api-Key": uniq})
    assert r.status_code == 503

