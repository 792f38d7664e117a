"""The Redis side of the db_writer: take, acknowledge, recover, and the writer lock.

Entries move from ``<spider>:items`` to ``<spider>:items:processing`` when
taken and leave the processing list only after their batch is committed, so
an entry is in Redis until it is in the database (at least once). The
processing list is safe to trim by position because one writer at a time
appends to it: the one whose token is in the lock key. Taking and
acknowledging are Lua scripts that check the token first, so a writer that
lost the lock (paused past its TTL, then came back) changes nothing.

The lock holds a token unique to each process run (uuid4), never a hostname
and pid: replicas in containers share both (every process is pid 1). A
successor takes the lock when the holder releases it at a clean stop, or
when its TTL runs out after a crash; nothing takes a held lock over.

Every call goes through the process' one call path
(:class:`~spiders_project.redis_access.SyncRedisCalls`), which classifies
errors, backs off and logs Redis' state changes. The lock, take and ack
scripts carry ``allow-oom``: they keep memory level or free it, and the
db_writer, the one process that frees Redis memory, must start and drain
while Redis is full. Calls that can be repeated safely (reads, lock, refresh)
retry until Redis answers, sleeping with the call path's sleep, which ends
the wait when a stop is requested. Take and ack are tried once
(``retry=False``): one whose reply was lost may have moved entries, and the
writer then reads the processing list again from its head instead of
repeating the call.
"""

from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path

from spiders_project.keys import RedisKeys
from spiders_project.redis_access import RedisUnavailable, SyncRedisCalls, load_lua

logger = logging.getLogger(__name__)

LUA_DIR = Path(__file__).with_name("lua")

# How often an idle writer looks at the buffer while Redis refuses writes
# (see ItemQueue.wait): 5 LLEN per second, and an item waits at most 0.2 s.
REFUSED_POLL = 0.2


class LockLost(Exception):
    """Another writer holds the lock now: the batch in hand must not be acknowledged."""


class ItemQueue:
    """One writer's view of a spider's item buffer, processing list and lock."""

    def __init__(self, calls: SyncRedisCalls, keys: RedisKeys, lock_ttl: float) -> None:
        self.calls = calls
        self.client = calls.client
        self.keys = keys
        self.lock = keys.db_writer_lock
        self.lock_ttl_ms = int(lock_ttl * 1000)
        self._refresh_every = lock_ttl / 3
        self._refreshed_at = float("-inf")
        self.token = uuid.uuid4().hex
        self._lock = load_lua(LUA_DIR, "lock")
        self._refresh_lock = load_lua(LUA_DIR, "refresh_lock")
        self._release_lock = load_lua(LUA_DIR, "release_lock")
        self._take = load_lua(LUA_DIR, "take")
        self._ack = load_lua(LUA_DIR, "ack")

    # --- the lock -------------------------------------------------------------

    def try_lock(self) -> bool:
        """Take the lock if it is free (its holder released it, or its TTL ran out).

        True as well when this writer holds it already (it is extended then).
        """
        if self.calls.script(self._lock, [self.lock], [self.token, self.lock_ttl_ms]):
            self._refreshed_at = time.monotonic()
            return True
        return False

    def holder(self) -> str | None:
        """The token in the lock key, if any."""
        value = self.calls.command("GET", self.lock, writes=False)
        return value.decode("utf-8", "replace") if value is not None else None

    def refresh_lock(self) -> None:
        """Extend the lock when a third of its TTL has passed; raise LockLost if it is gone."""
        now = time.monotonic()
        if now - self._refreshed_at < self._refresh_every:
            return
        if not self.calls.script(self._refresh_lock, [self.lock], [self.token, self.lock_ttl_ms]):
            raise LockLost(self.lock)
        self._refreshed_at = now

    def forget_refresh(self) -> None:
        """Make the next :meth:`refresh_lock` check the lock (after Redis was away)."""
        self._refreshed_at = float("-inf")

    def release_lock(self) -> None:
        """Delete the lock if this writer holds it, so a successor starts at once.

        Tried once: when Redis is away, the lock expires by itself.
        """
        self.calls.script(self._release_lock, [self.lock], [self.token], retry=False)

    # --- entries --------------------------------------------------------------

    def take(self, count: int) -> list[bytes]:
        """Move up to ``count`` entries, oldest first, into the processing list."""
        moved: list[bytes] | None = self.calls.script(
            self._take,
            [self.keys.items, self.keys.items_processing, self.lock],
            [self.token, count],
            retry=False,
        )
        if moved is None:
            raise LockLost(self.lock)
        return moved

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until the buffer has an entry; leave it there.

        While Redis takes writes: BLMOVE from the head of the list back to its
        head, a rotation of one element. Nothing moves, but the call blocks
        like BLPOP and returns as soon as a producer pushes. Taking stays with
        :meth:`take`, which checks the lock.

        While Redis refuses writes (OOM, READONLY), BLMOVE is refused too:
        every blocking list command (BLPOP, BLMOVE, BLMPOP, ...) removes or
        moves an element, so Redis flags them all as writes, and there is no
        read-only way to block on a list. The buffer is polled with LLEN every
        REFUSED_POLL seconds instead. BLMOVE is still tried first at each
        wait: it is the call whose success shows Redis takes writes again
        (the allow-oom scripts succeed either way), and it costs one refused
        round trip per poll.
        """
        timeout = max(round(timeout, 3), 0.001)  # 0 would mean forever
        try:
            moved = self.calls.call(
                "BLMOVE items",
                lambda: self.client.blmove(
                    self.keys.items,
                    self.keys.items,
                    # Redis takes fractional seconds; redis-py's hint says int.
                    timeout,  # type: ignore[arg-type]
                    "LEFT",
                    "LEFT",
                ),
                retry=False,
            )
            return moved is not None
        except RedisUnavailable:
            if not self.calls.state.connected:
                raise
        # A plain sleep, not the call path's (which ends at a stop request): a
        # writer stopping warm still writes the partial batch it is filling.
        time.sleep(min(timeout, REFUSED_POLL))
        return bool(self.calls.command("LLEN", self.keys.items, retry=False, writes=False))

    def read_processing(self, count: int) -> list[bytes]:
        """The first ``count`` entries left in the processing list (recovery)."""
        entries: list[bytes] = self.calls.command(
            "LRANGE", self.keys.items_processing, 0, count - 1, writes=False
        )
        return entries

    def processing_length(self) -> int:
        """How many entries wait in the processing list."""
        length: int = self.calls.command("LLEN", self.keys.items_processing, writes=False)
        return length

    def is_empty(self) -> bool:
        """True when neither the buffer nor the processing list holds an entry."""

        def lengths() -> list[int]:
            pipe = self.client.pipeline(transaction=False)
            pipe.llen(self.keys.items)
            pipe.llen(self.keys.items_processing)
            return pipe.execute()

        return not any(self.calls.call("LLEN items", lengths, writes=False))

    def ack(self, count: int, written: int, rejected: list[bytes]) -> None:
        """Remove the first ``count`` processing entries, keep ``rejected``, count the batch."""
        done = self.calls.script(
            self._ack,
            [
                self.keys.items_processing,
                self.keys.items_rejected,
                self.keys.db_writer_stats,
                self.lock,
            ],
            [self.token, self.lock_ttl_ms, count, written, f"{time.time():.3f}", *rejected],
            retry=False,
        )
        if not done:
            raise LockLost(self.lock)
        self._refreshed_at = time.monotonic()
