"""Waiting in the db_writer: its database retry delays and its stop request.

Every wait of the process (for Redis, the database or the lock) sleeps in
slices and ends as soon as a stop is requested.
"""

from __future__ import annotations

import time

# Sleeps are cut into slices this long, so a stop request is seen quickly.
SLEEP_SLICE = 0.2


class Backoff:
    """Database retry delays: ``first``, doubled after each failure, at most ``cap``.

    Redis has its own, shared by the whole process, in
    :class:`~spiders_project.redis_access.RedisState`.
    """

    def __init__(self, first: float, cap: float) -> None:
        self.first = first
        self.cap = cap
        self._next = first

    def next_delay(self) -> float:
        delay = self._next
        self._next = min(self._next * 2, self.cap)
        return delay

    def reset(self) -> None:
        self._next = self.first


class StopRequested(Exception):
    """A stop was requested while the writer waited (for Redis, the database or the lock)."""


class StopFlag:
    """The writer's stop request: set by a signal handler, seen by every wait of the process.

    Its :meth:`sleep` is the Redis call path's sleep between retries
    (``SyncRedisCalls(client, state, sleep=stop.sleep)``), so a writer
    retrying a call while Redis is away or refuses writes stops at once.
    """

    def __init__(self) -> None:
        self.requested = False

    def sleep(self, seconds: float) -> None:
        """Sleep in slices; raise :class:`StopRequested` as soon as a stop is requested."""
        end = time.monotonic() + seconds
        while True:
            if self.requested:
                raise StopRequested
            remaining = end - time.monotonic()
            if remaining <= 0:
                return
            time.sleep(min(remaining, SLEEP_SLICE))
