"""The circuit breaker in front of the server (httplimit/breaker.go): same
states, thresholds and cool-down."""

import enum
import errno
import threading
from typing import Callable, Optional, Tuple

import redis.exceptions

from ._errors import BadReplyError

#: Consecutive failed decisions that open the breaker.
DEFAULT_BREAKER_FAILURES = 5
#: Seconds an open breaker refuses every decision before one probe.
DEFAULT_BREAKER_COOL_DOWN = 1.0


class Outcome(enum.Enum):
    """What a decision the breaker let through says of the server."""

    ANSWERED = 0  # a decision, an error reply, a reply of the wrong shape: it is up
    FAILED = 1  # unreachable, or no answer in time
    REFUSED = 2  # the host refused the connection: it is down
    UNKNOWN = 3  # the caller gave up first: the round trip says nothing


_CLOSED, _OPEN, _PROBING = 0, 1, 2

# redis-py turns some error replies into ConnectionError subclasses: they
# come from a server that answers.
_REPLY_ERRORS = (
    redis.exceptions.ResponseError,
    redis.exceptions.AuthenticationError,
    redis.exceptions.AuthorizationError,
    redis.exceptions.BusyLoadingError,
    BadReplyError,
)


def is_refused(exc: BaseException) -> bool:
    """Whether exc is (or was caused by) a refused connection: nothing
    listens on the server's port."""
    seen = 0
    e: Optional[BaseException] = exc
    while e is not None and seen < 8:
        if isinstance(e, ConnectionRefusedError) or (isinstance(e, OSError) and e.errno == errno.ECONNREFUSED):
            return True
        e = e.__cause__ or e.__context__
        seen += 1
    return False


def classify(exc: Optional[BaseException]) -> Outcome:
    """The outcome of a round trip that ended with exc (None: a reply)."""
    if exc is None or isinstance(exc, _REPLY_ERRORS):
        return Outcome.ANSWERED
    if is_refused(exc):
        return Outcome.REFUSED
    if not isinstance(exc, Exception):  # cancelled: the caller went away
        return Outcome.UNKNOWN
    return Outcome.FAILED


class Breaker:
    """Closed, it lets every decision through and counts consecutive
    failures; after failures of them in a row, or at once when the server
    refused the connection, it opens and refuses every decision without a
    round trip for cool_down seconds; then it is half-open: one decision goes
    through as a probe (the others are still refused), and the probe's
    success closes it, its failure opens it for another cool_down.

    Safe for use from many threads; clock returns seconds (monotonic)."""

    def __init__(self, failures: int, cool_down: float, clock: Callable[[], float]):
        self.failures = failures
        self.cool_down = cool_down
        self._clock = clock
        self._lock = threading.Lock()
        self._state = _CLOSED
        self._streak = 0
        self._opened_at = 0.0

    def allow(self) -> Tuple[bool, bool]:
        """(ok, probe): whether a decision may go to the server now, and
        whether it is the half-open breaker's one probe."""
        with self._lock:
            if self._state == _CLOSED:
                return True, False
            if self._state == _OPEN:
                if self._clock() - self._opened_at < self.cool_down:
                    return False, False
                self._state = _PROBING
                return True, True
            return False, False  # a probe is in flight

    def done(self, probe: bool, o: Outcome) -> None:
        """Records the outcome of a decision allow let through."""
        with self._lock:
            if probe and o is Outcome.UNKNOWN:
                self._state = _OPEN  # the next decision probes again
            elif probe and o is Outcome.ANSWERED:
                self._state, self._streak = _CLOSED, 0
            elif probe:
                self._state, self._opened_at = _OPEN, self._clock()
            elif self._state != _CLOSED or o is Outcome.UNKNOWN:
                pass  # started before the breaker opened, or says nothing
            elif o is Outcome.ANSWERED:
                self._streak = 0
            else:
                self._streak += 1
                if o is Outcome.REFUSED or self._streak >= self.failures:
                    self._state, self._opened_at, self._streak = _OPEN, self._clock(), 0

    @property
    def is_open(self) -> bool:
        """Whether the breaker refuses decisions now (open or probing)."""
        with self._lock:
            return self._state != _CLOSED
