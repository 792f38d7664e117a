"""The Redis side of the db_writer: take, acknowledge, recover, and the writer lock.

Entries move from ``<spider>:items`` to ``<spider>:items:processing`` when
taken and leave the processing list only after their batch is committed, so
an entry is in Redis until it is in the database (at least once). The
processing list is safe to trim by position because one writer at a time
appends to it: the one whose token is in the lock key. Taking and
acknowledging are Lua scripts that check the token first, so a writer that
lost the lock (paused past its TTL, then came back) changes nothing.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from functools import cache
from pathlib import Path

import redis

from spiders_project.keys import RedisKeys

logger = logging.getLogger(__name__)

LUA_DIR = Path(__file__).with_name("lua")

# Seconds the lock outlives its last refresh. A writer refreshes it at every
# batch and about every LOCK_TTL / 3 s when idle or retrying, so only a writer
# that is dead (or stuck for this long) loses it. A writer killed on this
# host is detected at once (its pid is gone); elsewhere, a successor waits
# for the TTL.
LOCK_TTL = 10.0


class LockLost(Exception):
    """Another writer holds the lock now: the batch in hand must not be acknowledged."""


@cache
def lua_source(name: str) -> str:
    """The text of ``lua/<name>.lua``."""
    return (LUA_DIR / f"{name}.lua").read_text()


class ItemQueue:
    """One writer's view of a spider's item buffer, processing list and lock."""

    def __init__(self, client: redis.Redis, keys: RedisKeys, lock_ttl: float = LOCK_TTL) -> None:
        self.client = client
        self.keys = keys
        self.lock = keys.db_writer_lock
        self.lock_ttl_ms = int(lock_ttl * 1000)
        self._refresh_every = lock_ttl / 3
        self._refreshed_at = float("-inf")
        # host:pid:random, so a successor on the same host can tell a dead holder.
        self.token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        self._take = client.register_script(lua_source("take"))
        self._ack = client.register_script(lua_source("ack"))
        self._swap_lock = client.register_script(lua_source("swap_lock"))
        self._release_lock = client.register_script(lua_source("release_lock"))

    # --- the lock -------------------------------------------------------------

    def try_lock(self) -> bool:
        """Take the lock if it is free or its holder died on this host."""
        if self.client.set(self.lock, self.token, nx=True, px=self.lock_ttl_ms):
            self._refreshed_at = time.monotonic()
            return True
        holder = self.holder()
        if holder is not None and _holder_is_dead(holder):
            if self._swap_lock(keys=[self.lock], args=[holder, self.token, self.lock_ttl_ms]):
                logger.info(
                    "took over the lock %s of a db_writer that died (%s)", self.lock, holder
                )
                self._refreshed_at = time.monotonic()
                return True
        return False

    def holder(self) -> str | None:
        """The token in the lock key, if any."""
        value = self.client.get(self.lock)
        return value.decode("utf-8", "replace") if value is not None else None

    def refresh_lock(self) -> None:
        """Extend the lock when a third of its TTL has passed; raise LockLost if it is gone."""
        now = time.monotonic()
        if now - self._refreshed_at < self._refresh_every:
            return
        if not self._swap_lock(keys=[self.lock], args=[self.token, self.token, self.lock_ttl_ms]):
            raise LockLost(self.lock)
        self._refreshed_at = now

    def forget_refresh(self) -> None:
        """Make the next :meth:`refresh_lock` check the lock (after Redis was away)."""
        self._refreshed_at = float("-inf")

    def release_lock(self) -> None:
        """Delete the lock if this writer holds it, so a successor starts at once."""
        self._release_lock(keys=[self.lock], args=[self.token])

    # --- entries --------------------------------------------------------------

    def take(self, count: int) -> list[bytes]:
        """Move up to ``count`` entries, oldest first, into the processing list."""
        moved = self._take(
            keys=[self.keys.items, self.keys.items_processing, self.lock],
            args=[self.token, count],
        )
        if moved is None:
            raise LockLost(self.lock)
        return moved

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds until the buffer has an entry; leave it there.

        BLMOVE from the head of the list back to its head is a rotation of one
        element: nothing moves, but the call blocks like BLPOP. Taking stays
        with :meth:`take`, which checks the lock.
        """
        timeout = max(round(timeout, 3), 0.001)  # 0 would mean forever
        return (
            self.client.blmove(self.keys.items, self.keys.items, timeout, "LEFT", "LEFT")
            is not None
        )

    def read_processing(self, count: int) -> list[bytes]:
        """The first ``count`` entries left in the processing list (recovery)."""
        return self.client.lrange(self.keys.items_processing, 0, count - 1)

    def processing_length(self) -> int:
        """How many entries wait in the processing list."""
        return self.client.llen(self.keys.items_processing)

    def is_empty(self) -> bool:
        """True when neither the buffer nor the processing list holds an entry."""
        pipe = self.client.pipeline(transaction=False)
        pipe.llen(self.keys.items)
        pipe.llen(self.keys.items_processing)
        return not any(pipe.execute())

    def ack(self, count: int, written: int, rejected: list[bytes]) -> None:
        """Remove the first ``count`` processing entries, keep ``rejected``, count the batch."""
        done = self._ack(
            keys=[
                self.keys.items_processing,
                self.keys.items_rejected,
                self.keys.db_writer_stats,
                self.lock,
            ],
            args=[self.token, self.lock_ttl_ms, count, written, f"{time.time():.3f}", *rejected],
        )
        if not done:
            raise LockLost(self.lock)
        self._refreshed_at = time.monotonic()

    def ping(self) -> None:
        """Raise a connection error unless Redis answers."""
        self.client.ping()


def _holder_is_dead(holder: str) -> bool:
    """Whether a lock token names a process of this host that no longer runs.

    Our own pid counts as dead: the holder is an earlier process that had the
    same pid, as after a container restart.
    """
    host, _, rest = holder.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False
