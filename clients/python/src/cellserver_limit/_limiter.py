"""Limiter (sync, over redis.Redis) and AsyncLimiter (over redis.asyncio):
one round trip per decision, or none when the deny cache knows the answer."""

import asyncio
import inspect
import queue
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Callable, Dict, List, Optional, Sequence

import redis.exceptions

from ._breaker import (
    DEFAULT_BREAKER_COOL_DOWN,
    DEFAULT_BREAKER_FAILURES,
    Breaker,
    Outcome,
    classify,
)
from ._decision import Decision, parse_reply, policy_field
from ._denycache import DEFAULT_DENY_CACHE_MAX, DEFAULT_DENY_CACHE_SIZE, Counters, DenyCache
from ._errors import (
    BadReplyError,
    CircuitOpenError,
    DecisionTimeoutError,
    InvalidOptionError,
    InvalidQuantityError,
)
from ._keys import server_key
from ._policy import MAX_QUANTITY, Compiled, Policy, compile_all

#: Seconds one decision (one round trip) may take unless timeout says otherwise.
DEFAULT_TIMEOUT = 0.1


def _positive(name: str, v: object) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0 or v == float("inf"):
        raise InvalidOptionError(f"{name} {v!r} must be a positive number of seconds")
    return float(v)


class _Core:
    """What both limiters share: the policies, the command, the breaker, the
    deny cache and the counters. No I/O."""

    def __init__(
        self,
        policies: Sequence[Policy],
        *,
        key_prefix: str,
        timeout: float,
        circuit_breaker: bool,
        breaker_failures: int,
        breaker_cool_down: float,
        deny_cache: float,
        deny_cache_size: int,
        clock: Callable[[], int],
    ):
        self.timeout = _positive("timeout", timeout)
        if not isinstance(key_prefix, str) or "{" in key_prefix or "}" in key_prefix:
            raise InvalidOptionError(f"key prefix {key_prefix!r} must be a string without a brace")
        if isinstance(deny_cache, bool) or not isinstance(deny_cache, (int, float)) or not 0 <= deny_cache < float("inf"):
            raise InvalidOptionError(f"deny_cache {deny_cache!r} must be 0 (off) or a positive number of seconds")
        if isinstance(deny_cache_size, bool) or not isinstance(deny_cache_size, int) or deny_cache_size < 1:
            raise InvalidOptionError(f"deny_cache_size {deny_cache_size!r} must be an integer of at least 1")
        self.policies: List[Compiled] = compile_all(policies)
        self.prefix = key_prefix
        self.clock = clock
        self.counters = Counters()
        self.breaker: Optional[Breaker] = None
        if circuit_breaker:
            if isinstance(breaker_failures, bool) or not isinstance(breaker_failures, int) or breaker_failures < 1:
                raise InvalidOptionError(f"circuit breaker: {breaker_failures!r} failures, want an integer of 1 or more")
            cool = _positive("circuit breaker: cool-down", breaker_cool_down)
            self.breaker = Breaker(breaker_failures, cool, lambda: clock() / 1e9)
        self.deny_cache: Optional[DenyCache] = None
        if deny_cache > 0:
            self.deny_cache = DenyCache(int(deny_cache * 1e9), deny_cache_size)
        self.policy_field = policy_field(self.policies)

    def command(self, key: str, n: int) -> List[Any]:
        """The one command deciding key: the policy's own command, or
        CL.THROTTLEALL for several. Keys go as bytes, so that any client key
        (a header's raw bytes) reaches the server as it is."""
        def skey(c: Compiled) -> bytes:
            return server_key(self.prefix, c.name, key).encode("utf-8", "surrogateescape")

        if len(self.policies) == 1:
            c = self.policies[0]
            return [c.command, skey(c), *c.params, n, *c.suffix]
        args: List[Any] = ["CL.THROTTLEALL"]
        for c in self.policies:
            args += [skey(c), *c.params, n]
        return args

    def before(self, key: str, n: int):
        """The deny cache's answer, or None and the breaker's (ok, probe).
        Raises InvalidQuantityError or CircuitOpenError."""
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_QUANTITY:
            raise InvalidQuantityError(f"quantity {n!r} is out of range 0 to 2^40")
        if self.deny_cache is not None:
            d = self.deny_cache.get(key, n, self.clock())
            if d is not None:
                self.counters.add(decisions=1, local=1)
                return d, False
        self.counters.add(decisions=1)
        probe = False
        if self.breaker is not None:
            ok, probe = self.breaker.allow()
            if not ok:
                self.counters.add(errors=1)
                raise CircuitOpenError("circuit breaker open: the server failed recently")
        self.counters.add(round_trips=1)
        return None, probe

    def failed(self, probe: bool, exc: BaseException) -> None:
        if self.breaker is not None:
            self.breaker.done(probe, classify(exc))
        self.counters.add(errors=1)

    def after(self, key: str, n: int, probe: bool, reply: object) -> Decision:
        try:
            d = parse_reply(reply, self.policies)
        except BadReplyError as e:
            self.failed(probe, e)
            raise
        if self.breaker is not None:
            self.breaker.done(probe, Outcome.ANSWERED)
        if not d.allowed and self.deny_cache is not None:
            self.deny_cache.put(key, n, d, self.clock())
        return d

    def timed_out(self, cmd: str, exc: BaseException) -> DecisionTimeoutError:
        err = DecisionTimeoutError(f"{cmd}: no decision within {self.timeout * 1000:g} ms")
        err.__cause__ = exc
        return err


class _Base:
    _core: _Core

    def __init__(
        self,
        client: Any,
        policies: Sequence[Policy],
        *,
        key_prefix: str = "",
        timeout: float = DEFAULT_TIMEOUT,
        circuit_breaker: bool = True,
        breaker_failures: int = DEFAULT_BREAKER_FAILURES,
        breaker_cool_down: float = DEFAULT_BREAKER_COOL_DOWN,
        deny_cache: float = DEFAULT_DENY_CACHE_MAX,
        deny_cache_size: int = DEFAULT_DENY_CACHE_SIZE,
        clock: Callable[[], int] = time.monotonic_ns,
    ):
        execute = getattr(client, "execute_command", None)
        if execute is None:
            raise InvalidOptionError(f"client {client!r} has no execute_command: want a {self._CLIENT}")
        self._check_client(execute)
        self._core = _Core(
            policies, key_prefix=key_prefix, timeout=timeout, circuit_breaker=circuit_breaker,
            breaker_failures=breaker_failures, breaker_cool_down=breaker_cool_down,
            deny_cache=deny_cache, deny_cache_size=deny_cache_size, clock=clock,
        )
        self._client = client
        self._started()

    # The client the class speaks through, for error messages.
    _CLIENT = ""

    def _check_client(self, execute: Any) -> None:
        """Raises InvalidOptionError for a client of the other kind."""

    def _started(self) -> None:
        """Sets up what the class needs beyond the core."""

    @property
    def policies(self) -> List[Policy]:
        """The limiter's policies, in order."""
        return [c.policy for c in self._core.policies]

    @property
    def timeout(self) -> float:
        """Seconds one decision may take."""
        return self._core.timeout

    def server_key(self, policy: str, key: str) -> str:
        """The key the server holds for policy (by name) and the client
        key: prefix + policy + ":{" + tag + "}", where tag is the key itself
        or, when it is empty, longer than 128 bytes, holds a brace or starts
        with '=', '=' and its hash."""
        return server_key(self._core.prefix, policy, key)

    def policy_field(self) -> str:
        """The value of RateLimit-Policy for the limiter's policies."""
        return self._core.policy_field

    def counters(self) -> Dict[str, int]:
        """decisions, local (from the deny cache), round_trips and errors
        since the limiter was built (see Counters)."""
        return self._core.counters.snapshot()

    @property
    def breaker_open(self) -> bool:
        """Whether the circuit breaker refuses decisions now."""
        b = self._core.breaker
        return b is not None and b.is_open

    def clear_deny_cache(self) -> None:
        """Forgets every cached refusal (after an operator reset keys)."""
        if self._core.deny_cache is not None:
            self._core.deny_cache.clear()


_OPTIONS_DOC = """
    Options (keyword only):

    - key_prefix: put before every server key (default none), to keep
      several applications apart on one server; no brace.
    - timeout: seconds one decision may take (default 0.1).
    - circuit_breaker: False turns the breaker off; breaker_failures
      (default 5) consecutive failed decisions, or at once a refused
      connection, open it for breaker_cool_down seconds (default 1), during
      which decisions fail at once with CircuitOpenError; then one probe.
    - deny_cache: the most seconds a refusal is answered locally (default 1;
      0 turns the cache off); deny_cache_size: its bound (default 10,000
      entries, oldest dropped).
    - clock: nanoseconds of a monotonic clock (default time.monotonic_ns);
      tests pass a fake one.
"""


class Limiter(_Base):
    # A docstring must be a literal; the options are shared, so __doc__ is set.
    __doc__ = """Decides requests against policies with redis-py's synchronous client
    (redis.Redis): one round trip per decision, one policy with its own
    command, several (all GCRA) with one atomic CL.THROTTLEALL. Safe for use
    from many threads.

    Give the client socket_timeout (and socket_connect_timeout) no longer
    than the limiter's timeout, so that it stops a call itself; with any
    other client the call runs on a worker thread that the decision stops
    waiting for at the timeout.
    """ + _OPTIONS_DOC

    _WORKERS = 8
    _CLIENT = "redis.Redis"

    def _check_client(self, execute: Any) -> None:
        if inspect.iscoroutinefunction(execute):
            raise InvalidOptionError("client is asynchronous (redis.asyncio): use AsyncLimiter")

    def _started(self) -> None:
        self._bounded = _bounded(self._client, self._core.timeout)
        self._jobs: "queue.SimpleQueue[Any]" = queue.SimpleQueue()
        self._workers = 0
        self._workers_lock = threading.Lock()

    def allow(self, key: str, n: int = 1) -> Decision:
        """Takes n units (0 up to 2^40; 0 peeks) for key from every policy,
        atomically: either every policy allows and all are consumed, or the
        decision refuses and nothing is. One round trip bounded by the
        timeout, none when the deny cache holds a refusal of (key, n) or the
        circuit breaker is open.

        Raises when there is no decision: redis.RedisError (unreachable, an
        error reply such as CLUSTERDOWN), DecisionTimeoutError,
        BadReplyError, CircuitOpenError; InvalidQuantityError for n out of
        range."""
        core = self._core
        d, probe = core.before(key, n)
        if d is not None:
            return d
        args = core.command(key, n)
        try:
            reply = self._do(args)
        except BaseException as e:
            core.failed(probe, e)
            if isinstance(e, redis.exceptions.TimeoutError):
                raise core.timed_out(args[0], e) from e
            raise
        return core.after(key, n, probe, reply)

    def _do(self, args: List[Any]) -> object:
        if self._bounded:
            return self._client.execute_command(*args)
        fut: "Future[object]" = Future()
        self._start_worker()
        self._jobs.put((args, fut))
        try:
            return fut.result(self._core.timeout)
        except FutureTimeout as e:
            if fut.done():
                raise  # the call's own error
            # A call still queued behind busy workers is dropped: sent
            # later, it would consume for a request long answered.
            fut.cancel()
            raise self._core.timed_out(args[0], e) from e

    def _start_worker(self) -> None:
        if self._workers >= self._WORKERS:
            return
        with self._workers_lock:
            if self._workers >= self._WORKERS:
                return
            self._workers += 1
        # Daemon threads: a call the decision stopped waiting for ends at
        # the client's own timeout, and never holds the process at exit.
        threading.Thread(target=self._work, name="cellserver-limit", daemon=True).start()

    def _work(self) -> None:
        while True:
            args, fut = self._jobs.get()
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(self._client.execute_command(*args))
            except BaseException as e:  # delivered to the waiting decision
                fut.set_exception(e)


def _bounded(client: Any, timeout: float) -> bool:
    """Whether the client stops every socket operation within timeout by
    itself (redis-py's socket_timeout and socket_connect_timeout)."""
    pool = getattr(client, "connection_pool", None)
    kwargs = getattr(pool, "connection_kwargs", None)
    if not isinstance(kwargs, dict):
        return False
    st = kwargs.get("socket_timeout")
    ct = kwargs.get("socket_connect_timeout") or st
    return bool(st) and bool(ct) and st <= timeout and ct <= timeout


async def _within(aw: Any, timeout: float) -> object:
    # asyncio.wait_for, not asyncio.timeout: redis-py 4.3's reads run
    # under async_timeout, which keeps asyncio.timeout from turning its
    # cancellation into TimeoutError.
    return await asyncio.wait_for(aw, timeout)


class AsyncLimiter(_Base):
    # A docstring must be a literal; the options are shared, so __doc__ is set.
    __doc__ = """Decides requests against policies with redis-py's asyncio client
    (redis.asyncio.Redis), as Limiter does: one round trip per decision,
    bounded by the timeout (the call is cancelled at it, and redis-py drops
    the connection it was on).
    """ + _OPTIONS_DOC

    _CLIENT = "redis.asyncio.Redis"

    def _check_client(self, execute: Any) -> None:
        if not inspect.iscoroutinefunction(execute):
            raise InvalidOptionError("client is synchronous (redis.Redis): use Limiter, or redis.asyncio.Redis")

    async def allow(self, key: str, n: int = 1) -> Decision:
        """As Limiter.allow, awaited."""
        core = self._core
        d, probe = core.before(key, n)
        if d is not None:
            return d
        args = core.command(key, n)
        try:
            reply = await _within(self._client.execute_command(*args), core.timeout)
        except BaseException as e:
            core.failed(probe, e)
            if isinstance(e, (asyncio.TimeoutError, redis.exceptions.TimeoutError)):
                raise core.timed_out(args[0], e) from e
            raise
        return core.after(key, n, probe, reply)
