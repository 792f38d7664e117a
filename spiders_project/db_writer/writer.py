"""The db_writer loop: Redis item buffer in, database rows out, nothing lost.

One writer per spider: :class:`ItemQueue` enforces it with a lock key, and a
second instance waits for it. The writer takes a batch into the processing
list, writes it in one transaction, then acknowledges it; whatever a crashed
writer left in the processing list is written first at the next start.
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass

from scrapy.settings import BaseSettings

from spiders_project.db_writer.entries import Row, dedupe, parse_entries
from spiders_project.db_writer.item_queue import ItemQueue, LockLost
from spiders_project.db_writer.stores import RowsRefused, Store, StoreUnavailable
from spiders_project.redis_connection import CONNECTION_ERRORS

logger = logging.getLogger(__name__)

# Longest single wait for the buffer to fill, in seconds: an idle writer
# makes one blocking call per second, so it notices stop requests and keeps
# its lock fresh without spinning.
IDLE_WAIT = 1.0
# Retry backoff after a database error: first wait and cap, in seconds. Not
# settings yet; DB_WRITER_RETRY_BACKOFF(_MAX) would be their names.
DB_RETRY_BACKOFF = 0.5
DB_RETRY_BACKOFF_MAX = 30.0
# Sleeps are cut into slices this long, so a stop request is seen quickly.
SLEEP_SLICE = 0.2


@dataclass(frozen=True)
class WriterConfig:
    """The db_writer's settings, read once and checked."""

    batch_size: int
    max_wait: float
    redis_backoff: float
    redis_backoff_max: float

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> WriterConfig:
        config = cls(
            batch_size=settings.getint("DB_WRITER_BATCH_SIZE"),
            max_wait=settings.getfloat("DB_WRITER_MAX_WAIT"),
            redis_backoff=settings.getfloat("REDIS_RECONNECT_BACKOFF"),
            redis_backoff_max=settings.getfloat("REDIS_RECONNECT_BACKOFF_MAX"),
        )
        if config.batch_size < 1:
            raise ValueError(f"DB_WRITER_BATCH_SIZE must be at least 1, not {config.batch_size}")
        if config.max_wait < 0:
            raise ValueError(f"DB_WRITER_MAX_WAIT must not be negative, not {config.max_wait}")
        if not 0 < config.redis_backoff <= config.redis_backoff_max:
            raise ValueError("need 0 < REDIS_RECONNECT_BACKOFF <= REDIS_RECONNECT_BACKOFF_MAX")
        return config


class Backoff:
    """Exponential delays: ``first``, doubled after each failure, at most ``cap``."""

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


class _Stop(Exception):
    """Stop requested while Redis or the database is away: leave the batch in processing."""


class ItemWriter:
    """Moves items from a spider's Redis buffer into a :class:`Store`, in batches."""

    def __init__(
        self,
        queue: ItemQueue,
        store: Store,
        config: WriterConfig,
        *,
        exit_when_empty: bool = False,
        store_name: str = "database",
    ) -> None:
        self.queue = queue
        self.store = store
        self.config = config
        self.exit_when_empty = exit_when_empty
        self.store_name = store_name
        self.redis_backoff = Backoff(config.redis_backoff, config.redis_backoff_max)
        self.db_backoff = Backoff(DB_RETRY_BACKOFF, DB_RETRY_BACKOFF_MAX)
        self.stopping = False
        self._recovering = True
        self._have_lock = False
        self._db_down = False

    # --- stopping ---------------------------------------------------------------

    def request_stop(self, signum: int | None = None) -> None:
        """Finish the batch in hand (commit and acknowledge it), then stop.

        Safe to call from a signal handler, and more than once.
        """
        if self.stopping:
            return
        self.stopping = True
        name = signal.Signals(signum).name if signum is not None else "request"
        logger.info("draining: finishing the batch in hand, then stopping (%s)", name)

    # --- the loop ---------------------------------------------------------------

    def run(self) -> int:
        """Write batches until stopped (or, with ``exit_when_empty``, until nothing is left)."""
        while True:
            try:
                if not self._have_lock and not self._acquire_lock():
                    break
                if not self._step():
                    break
            except LockLost:
                self._lock_lost()
            except _Stop:
                break
            except CONNECTION_ERRORS as exc:
                # A take or ack whose reply was lost may have moved entries:
                # whatever is in the processing list is read again from its head.
                self._recovering = True
                try:
                    self._reconnect_redis(exc)
                except _Stop:
                    break
        self._shut_down()
        return 0

    def _step(self) -> bool:
        """Handle one batch (or one idle wait). False when the writer should stop."""
        if self.stopping:
            return False
        self.queue.refresh_lock()
        if self._recovering:
            entries = self.queue.read_processing(self.config.batch_size)
            if entries:
                self._handle(entries)
                return True
            self._recovering = False
        entries = self._fill_batch()
        if entries:
            self._handle(entries)
            return True
        if self.exit_when_empty and not self.stopping and self.queue.is_empty():
            logger.info("nothing left in %s, stopping", self.queue.keys.items)
            return False
        return True

    def _acquire_lock(self) -> bool:
        """Wait for the lock; False if a stop was requested meanwhile."""
        waiting = False
        while not self.queue.try_lock():
            if not waiting:
                logger.warning(
                    "another db_writer holds %s (%s); waiting for it to stop",
                    self.queue.lock,
                    self.queue.holder(),
                )
                waiting = True
            if not self._sleep(IDLE_WAIT, refresh=False):
                return False
        if waiting:
            logger.info("took the lock %s", self.queue.lock)
        self._have_lock = True
        self._recovering = True
        left = self.queue.processing_length()
        if left:
            logger.info(
                "recovering %d entries left in %s by an earlier run",
                left,
                self.queue.keys.items_processing,
            )
        return True

    def _lock_lost(self) -> None:
        """Drop the batch in hand (it stays in processing) and wait to hold the lock again.

        When another writer holds the lock, :meth:`_acquire_lock` says so.
        """
        self._have_lock = False
        try:
            holder = self.queue.holder()
        except CONNECTION_ERRORS:
            return  # the next call meets the error and reconnects
        if holder is None:
            logger.warning(
                "the lock %s expired (Redis restarted, or this writer stalled); taking it again",
                self.queue.lock,
            )

    def _fill_batch(self) -> list[bytes]:
        """Take entries until the batch is full or DB_WRITER_MAX_WAIT passed since the first."""
        size = self.config.batch_size
        batch: list[bytes] = []
        deadline = 0.0
        while len(batch) < size and not self.stopping:
            want = size - len(batch)
            got = self.queue.take(want)
            if got and not batch:
                deadline = time.monotonic() + self.config.max_wait
            batch.extend(got)
            if len(got) == want:
                continue
            if not batch:
                if self.exit_when_empty or not self.queue.wait(IDLE_WAIT):
                    break  # idle: let the caller check for stop and exit conditions
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self.queue.refresh_lock()
            self.queue.wait(min(remaining, IDLE_WAIT))
        return batch

    def _handle(self, entries: list[bytes]) -> None:
        """Write one batch of entries, then acknowledge all of them."""
        rows, rejected = parse_entries(entries)
        reject_raw = [entry.raw for entry in rejected]
        for entry in rejected:
            logger.warning(
                "rejected an entry of %s: %s; kept in %s: %s",
                self.queue.keys.items,
                entry.reason,
                self.queue.keys.items_rejected,
                entry.preview(),
            )
        written = len(rows)
        refused = self._write(dedupe(rows))
        if refused:
            refused_urls = {row.url for row, _ in refused}
            written = sum(1 for row in rows if row.url not in refused_urls)
            for row, reason in refused:
                reject_raw.append(row.raw)
                logger.warning(
                    "the database refused the item %.200r: %s; kept in %s",
                    row.url,
                    reason,
                    self.queue.keys.items_rejected,
                )
        self.queue.ack(len(entries), written, reject_raw)

    def _write(self, rows: list[Row]) -> list[tuple[Row, str]]:
        """Write until the database takes the batch; return the rows it refused."""
        if not rows:
            return []
        attempt = 0
        while True:
            attempt += 1
            try:
                refused = self._write_isolating(rows)
            except StoreUnavailable as exc:
                if attempt == 1 and not self._db_down:
                    # A connection the server dropped while we were idle (a
                    # restart, an idle timeout) fails once; the store reconnects.
                    logger.debug("write failed, retrying at once: %s", exc)
                    continue
                if not self._db_down:
                    logger.error(
                        "%s unavailable, retrying; the batch stays in %s: %s",
                        self.store_name,
                        self.queue.keys.items_processing,
                        exc,
                    )
                    self._db_down = True
                if not self._sleep(self.db_backoff.next_delay()):
                    self._stop_with_batch_in_processing()
                continue
            if self._db_down:
                logger.info("%s available again", self.store_name)
                self._db_down = False
                self.db_backoff.reset()
            return refused

    def _write_isolating(self, rows: Sequence[Row]) -> list[tuple[Row, str]]:
        """Write ``rows``; if a value is refused, split the batch until the culprits are alone."""
        try:
            self.store.write_batch(rows)
            return []
        except RowsRefused as exc:
            if len(rows) == 1:
                return [(rows[0], str(exc))]
        middle = len(rows) // 2
        return self._write_isolating(rows[:middle]) + self._write_isolating(rows[middle:])

    # --- Redis away ---------------------------------------------------------------

    def _reconnect_redis(self, exc: BaseException) -> None:
        logger.warning("Redis connection lost, reconnecting (%s: %s)", type(exc).__name__, exc)
        self.redis_backoff.reset()
        while True:
            if not self._sleep(self.redis_backoff.next_delay(), refresh=False):
                self._stop_with_batch_in_processing()
            try:
                self.queue.ping()
            except CONNECTION_ERRORS:
                continue
            break
        logger.info("Redis reconnected")
        self.queue.forget_refresh()

    # --- helpers ------------------------------------------------------------------

    def _sleep(self, seconds: float, refresh: bool = True) -> bool:
        """Sleep in slices, keeping the lock fresh; False as soon as a stop is requested."""
        end = time.monotonic() + seconds
        while not self.stopping:
            remaining = end - time.monotonic()
            if remaining <= 0:
                return True
            if refresh:
                self.queue.refresh_lock()
            time.sleep(min(remaining, SLEEP_SLICE))
        return False

    def _stop_with_batch_in_processing(self) -> None:
        logger.warning(
            "stopping without finishing the batch in hand; it stays in %s for the next start",
            self.queue.keys.items_processing,
        )
        raise _Stop

    def _shut_down(self) -> None:
        try:
            self.queue.release_lock()
        except CONNECTION_ERRORS:
            pass  # the lock expires by itself
        self.store.close()
        logger.info("stopped")
