"""The deny cache and the limiter's counters."""

import threading
from collections import OrderedDict
from typing import Dict, Optional, Tuple

from ._decision import Decision, aged

#: Default cap, in seconds, on how long a refusal is answered locally.
DEFAULT_DENY_CACHE_MAX = 1.0
#: Default bound on the deny cache's entries (the oldest is dropped).
DEFAULT_DENY_CACHE_SIZE = 10_000


class Counters:
    """What a limiter did, counted since it was built. Safe for use from many
    threads.

    decisions: every allow with a valid quantity, the sum of local,
    round_trips and the calls the open circuit breaker failed at once.
    local: the decisions the deny cache answered, without a round trip.
    round_trips: the commands sent to the server, answered or not. errors:
    the calls that ended without a decision (no answer in time, a refused
    connection, an error reply, a bad reply, the circuit breaker open). The
    deny cache's hit rate is local / decisions. Named as httplimit's Stats.
    """

    __slots__ = ("_lock", "decisions", "local", "round_trips", "errors")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.decisions = 0
        self.local = 0
        self.round_trips = 0
        self.errors = 0

    def add(self, decisions: int = 0, local: int = 0, round_trips: int = 0, errors: int = 0) -> None:
        with self._lock:
            self.decisions += decisions
            self.local += local
            self.round_trips += round_trips
            self.errors += errors

    def snapshot(self) -> Dict[str, int]:
        """The four counters as a dict, read together."""
        with self._lock:
            return {
                "decisions": self.decisions,
                "local": self.local,
                "round_trips": self.round_trips,
                "errors": self.errors,
            }


class DenyCache:
    """Refusals kept near the caller: after a decision refused with
    retry_after r for (key, quantity), the same (key, quantity) is refused
    locally until min(r, max) passes, with fields aged by the time passed. A
    refusal that can never end (retry_after -1) is kept for max. It only
    ever refuses, never admits. Bounded: the oldest entry is dropped. Safe
    for use from many threads; times are clock() nanoseconds."""

    def __init__(self, max_ns: int, size: int):
        self._max_ns = max_ns
        self._size = size
        self._lock = threading.Lock()
        # (key, quantity) -> (expires, stored, decision); oldest first.
        self._entries: "OrderedDict[Tuple[str, int], Tuple[int, int, Decision]]" = OrderedDict()

    def get(self, key: str, n: int, now: int) -> Optional[Decision]:
        """The cached refusal of (key, n) as it stands at now, or None."""
        k = (key, n)
        with self._lock:
            e = self._entries.get(k)
            if e is None:
                return None
            expires, stored, d = e
            if now >= expires:
                del self._entries[k]
                return None
        return aged(d, now - stored)

    def put(self, key: str, n: int, d: Decision, now: int) -> None:
        """Keeps the refusal d of (key, n), decided at now."""
        if d.allowed:
            return
        wait = d.retry_after_ms()
        ttl = self._max_ns if wait is None else min(wait * 1_000_000, self._max_ns)
        if ttl <= 0:
            return
        k = (key, n)
        with self._lock:
            self._entries.pop(k, None)
            self._entries[k] = (now + ttl, now, d)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def clear(self) -> None:
        """Forgets every refusal."""
        with self._lock:
            self._entries.clear()
