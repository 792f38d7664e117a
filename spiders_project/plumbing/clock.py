"""Redis' clock: what the frontier's Lua scripts run at, and what a worker stamps.

Every time-based script (lease turns and deadlines, renewal, reclaim,
Retry-After pauses, the dispatch gate, stats samples) takes ``now`` as its
first argument. Production always passes "": the script then reads Redis'
``TIME``, one clock for every node whatever the nodes' own clocks say. A test
sets a time on :class:`ScriptClock` and steps it, so that no test sleeps to
cross a deadline (and none is flaky on a loaded machine because it slept too
little). What a worker stamps in Python (items, dead letters) follows the
same clock through :class:`RedisTime`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime


class ScriptClock:
    """``now`` for the scripts: "" (Redis' TIME) until ``set`` is called."""

    def __init__(self) -> None:
        self._ms: int | None = None

    def arg(self) -> int | str:
        """The scripts' ``now`` argument: milliseconds since the epoch, or ""."""
        return "" if self._ms is None else self._ms

    def set(self, ms: int | None) -> None:
        """Run the scripts at ``ms`` from now on (None: back to Redis' clock)."""
        self._ms = ms

    def advance(self, ms: int) -> None:
        """Step a set clock forward by ``ms``."""
        if self._ms is None:
            raise RuntimeError("ScriptClock.advance needs a time set first")
        self._ms += ms


class RedisTime:
    """The wall-clock time of Redis, as this worker sees it: its own clock plus an offset.

    The cluster's times (lease deadlines, heartbeats, stats samples, turns,
    recrawl times) are Redis' (``TIME`` in the scripts), so that a node whose
    clock is off, by a second or an hour, still crawls correctly. What a
    worker stamps itself (an item's time, which decides which row is newer,
    a dead letter's ``failed_at``, a page's ``fetched_at``) must be on that
    clock too, or a node an hour ahead would win every "newer wins". The
    offset is measured at start and again every lease renewal (one ``TIME``
    per FRONTIER_LEASE_TIMEOUT / 3), halfway through the round trip; until
    the first answer it is 0 (the node's own clock).
    """

    def __init__(self, local: Callable[[], float] = time.time) -> None:
        self._local = local
        self.offset = 0.0  # seconds to add to this node's clock
        self.known = False

    def observe(self, redis_seconds: float, sent_at: float, received_at: float) -> None:
        """Record Redis' ``TIME`` reply, asked at ``sent_at`` and answered at ``received_at``."""
        self.offset = redis_seconds - (sent_at + received_at) / 2
        self.known = True

    def now(self) -> float:
        """Seconds since the epoch on Redis' clock."""
        return self._local() + self.offset

    def now_datetime(self) -> datetime:
        """``now()`` as an aware UTC datetime."""
        return datetime.fromtimestamp(self.now(), UTC)
