"""An HTTP service behind cellserver rate limits, to copy from (Starlette on
uvicorn): GET /hello is limited per client IP by two policies decided in one
round trip, answered 429 with Retry-After and the RateLimit fields when
over, and failed open (or closed, with --fail-closed) when cellserver does
not answer within 100 ms. A refused client is answered from the deny cache
for up to a second, without a round trip.

    python3 examples/python/app.py --listen 127.0.0.1:8080 --cellserver 127.0.0.1:6379
    curl -i localhost:8080/hello

GET /debug/vars serves the limiter's counters as JSON:
{"limiter": {"decisions": N, "local": N, "round_trips": N, "errors": N}}.
It prints "listening on HOST:PORT" once it accepts connections (port 0
picks a free one).
"""

import argparse
import logging
import os
import socket
import sys

# The package from this repository when it is not installed.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python", "src"))

import redis.asyncio  # noqa: E402
import uvicorn  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.middleware import Middleware  # noqa: E402
from starlette.responses import JSONResponse, PlainTextResponse  # noqa: E402
from starlette.routing import Mount, Route  # noqa: E402

from cellserver_limit import AsyncLimiter, CircuitOpenError, Policy, by_ip  # noqa: E402
from cellserver_limit.asgi import RateLimitMiddleware  # noqa: E402

log = logging.getLogger("app")


def host_port(s: str):
    host, sep, port = s.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"{s!r} is not HOST:PORT")
    return host.strip("[]") or "127.0.0.1", int(port)


def build(cellserver, fail_closed: bool = False, trusted=(), deny_cache: float = 1.0):
    """The application: /hello limited, /debug/vars not."""
    # 1. The client. The limiter bounds each decision to 100 ms itself; the
    # connect timeout keeps an unreachable host from holding a connection.
    client = redis.asyncio.Redis(host=cellserver[0], port=cellserver[1], socket_connect_timeout=0.1)

    # 2. The policies: 20 at once and 10 per second, 10,000 a day, per client IP.
    limiter = AsyncLimiter(client, [
        Policy("burst", burst=19, count=10, period=1),
        Policy("daily", burst=9999, count=10000, period=86400),
    ], deny_cache=deny_cache)

    def on_error(req, exc):
        if isinstance(exc, CircuitOpenError):
            return  # every request while the server is down: the failures that opened it were logged
        log.warning("rate limiter unavailable: %s: %s", type(exc).__name__, exc)

    # 3. The service.
    async def hello(request):
        return PlainTextResponse("hello\n")

    async def debug_vars(request):
        return JSONResponse({"limiter": limiter.counters()})

    api = Starlette(
        routes=[Route("/hello", hello, methods=["GET"])],
        middleware=[Middleware(
            RateLimitMiddleware, limiter=limiter, key=by_ip(*trusted),
            fail_closed=fail_closed, legacy_headers=True, on_error=on_error,
        )],
    )
    return Starlette(routes=[Route("/debug/vars", debug_vars, methods=["GET"]), Mount("/", app=api)])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="An HTTP service behind cellserver rate limits.")
    p.add_argument("--listen", type=host_port, default=("127.0.0.1", 8080), help="HOST:PORT to serve HTTP on")
    p.add_argument("--cellserver", type=host_port, default=("127.0.0.1", 6379), help="cellserver's HOST:PORT")
    p.add_argument("--fail-closed", action="store_true",
                   help="answer 503 when cellserver does not answer, instead of letting requests through")
    p.add_argument("--trusted-proxies", default="",
                   help="comma-separated prefixes (10.0.0.0/8) of proxies whose X-Forwarded-For is believed")
    p.add_argument("--deny-cache", type=float, default=1.0, metavar="SECONDS",
                   help="the most seconds a refusal is answered locally (0: off)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    trusted = [s.strip() for s in args.trusted_proxies.split(",") if s.strip()]
    app = build(args.cellserver, args.fail_closed, trusted, args.deny_cache)

    # Bind first, so that "listening on" is printed once connections are
    # accepted (queued until the loop runs) and port 0 gives the real port.
    host, port = args.listen
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets whose
    # proto says TCP, and without it a kept-alive client waits ~40 ms per
    # request (Nagle's algorithm against the client's delayed ACK).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)
    bound = sock.getsockname()
    shown = f"[{bound[0]}]:{bound[1]}" if family == socket.AF_INET6 else f"{bound[0]}:{bound[1]}"
    print(f"listening on {shown}", flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())
