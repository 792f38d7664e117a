"""The db_writer loop: Redis item buffer in, database rows out, nothing lost.

One writer per spider: :class:`ItemQueue` enforces it with a lock key, and a
second instance waits for it. The writer takes a batch into the processing
list, writes it in one transaction, then acknowledges it; whatever a crashed
writer left in the processing list is written first at the next start.

Stopping is warm on the first SIGTERM: the batch in hand is committed and
acknowledged. A stop requested while the writer waits for Redis (away, or
refusing writes) or for the database ends the wait at once and leaves the
batch in the processing list for the next start; a second SIGTERM kills.
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from scrapy.settings import BaseSettings

from spiders_project.config import SettingsReader
from spiders_project.db_writer.entries import dedupe, parse_entries
from spiders_project.db_writer.item_queue import ItemQueue, LockLost
from spiders_project.db_writer.page_store import PAGES_TABLE, PageTable
from spiders_project.db_writer.revisits import RevisitScheduler
from spiders_project.db_writer.sql_store import TABLE_NAME, RowsRefused, Store, StoreUnavailable
from spiders_project.db_writer.stopping import SLEEP_SLICE, Backoff, StopFlag, StopRequested
from spiders_project.recrawl.pages_row import PageEntry
from spiders_project.redis_access import RedisUnavailable

__all__ = ["Backoff", "ItemWriter", "StopFlag", "StopRequested", "WriterConfig"]

logger = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class WriterConfig:
    """The db_writer's settings, read once and checked."""

    batch_size: int
    max_wait: float
    idle_wait: float
    retry_backoff: float
    retry_backoff_max: float
    lock_ttl: float
    tables: dict[str, str] = field(default_factory=dict)  # ITEM_TABLES: item type -> table
    spiders_poll: float = 5.0  # --all-spiders looks for new spiders this often (s)

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> WriterConfig:
        read = SettingsReader(settings)
        backoff = read.getfloat("DB_WRITER_RETRY_BACKOFF", above=0)
        return cls(
            batch_size=read.getint("DB_WRITER_BATCH_SIZE", minimum=1),
            max_wait=read.getfloat("DB_WRITER_MAX_WAIT", minimum=0),
            idle_wait=read.getfloat("DB_WRITER_IDLE_WAIT", above=0),
            retry_backoff=backoff,
            retry_backoff_max=read.getfloat("DB_WRITER_RETRY_BACKOFF_MAX", minimum=backoff),
            lock_ttl=read.getfloat("DB_WRITER_LOCK_TTL", above=0),
            tables=_item_tables(read),
            spiders_poll=read.getfloat("DB_WRITER_SPIDERS_POLL", above=0),
        )


def _item_tables(read: SettingsReader) -> dict[str, str]:
    """ITEM_TABLES, checked: each table name is written into SQL."""
    tables = read.getdict("ITEM_TABLES")
    for item_type, table in tables.items():
        if not isinstance(item_type, str) or not isinstance(table, str):
            read.fail("ITEM_TABLES", "must map item type names to table names")
        if table == PAGES_TABLE:
            read.fail("ITEM_TABLES", f"{table!r} is the db_writer's own table of page states")
        if not TABLE_NAME.match(table):
            read.fail(
                "ITEM_TABLES",
                f"table {table!r} must be a lower-case SQL identifier (letters, digits, _)",
            )
    return dict(tables)


class ItemWriter:
    """Moves items from a spider's Redis buffer into a :class:`Store`, in batches."""

    def __init__(
        self,
        queue: ItemQueue,
        store: Store,
        config: WriterConfig,
        *,
        stop: StopFlag | None = None,
        exit_when_empty: bool = False,
        store_name: str = "database",
        pages: PageTable | None = None,
        revisits: RevisitScheduler | None = None,
    ) -> None:
        self.queue = queue
        # The `pages` table (page-state entries) and the revisit scheduler, if kept.
        self.pages = pages
        self.revisits = revisits
        self.store = store
        self.config = config
        self.stop = stop if stop is not None else StopFlag()
        self.exit_when_empty = exit_when_empty
        self.store_name = store_name
        self.db_backoff = Backoff(config.retry_backoff, config.retry_backoff_max)
        self._recovering = True
        self._have_lock = False
        self._db_down = False
        # Entries taken into the processing list and not acknowledged yet.
        self._in_hand = False

    @property
    def stopping(self) -> bool:
        return self.stop.requested

    # --- stopping ---------------------------------------------------------------

    def request_stop(self, signum: int | None = None) -> None:
        """Finish the batch in hand (commit and acknowledge it), then stop.

        Safe to call from a signal handler, and more than once.
        """
        if self.stop.requested:
            return
        self.stop.requested = True
        name = signal.Signals(signum).name if signum is not None else "request"
        logger.info("draining: finishing the batch in hand, then stopping (%s)", name)

    # --- the loop ---------------------------------------------------------------

    def run(self) -> None:
        """Write batches until stopped (or, with ``exit_when_empty``, until nothing is left).

        It returns only when it stopped as asked; every other end is an exception,
        which the pool (``pool.py``) turns into exit status 1."""
        try:
            while self._turn():
                pass
        except StopRequested:
            if self._in_hand:
                logger.warning(
                    "stopping without finishing the batch in hand;"
                    " it stays in %s for the next start",
                    self.queue.keys.items_processing,
                )
        self._shut_down()

    def _turn(self) -> bool:
        """Take the lock if needed, then handle one batch. False when the writer should stop.

        Raises :class:`StopRequested` when a stop is requested while it waits.
        """
        try:
            if not self._have_lock:
                self._acquire_lock()
            return self._step()
        except LockLost:
            self._lock_lost()
        except RedisUnavailable as exc:
            # A take or ack whose reply was lost may have moved entries: whatever
            # is in the processing list is read again from its head. The call
            # path logged the state change; the next calls (a lock refresh
            # first) retry with its backoff until Redis answers and takes writes.
            self._recovering = True
            self.queue.forget_refresh()
            self.stop.sleep(exc.delay)
        return True

    def _step(self) -> bool:
        """Handle one batch (or one idle wait). False when the writer should stop."""
        if self.stopping:
            return False
        self.queue.refresh_lock()
        if self._recovering:
            entries = self.queue.read_processing(self.config.batch_size)
            if entries:
                self._in_hand = True
                self._handle(entries)
                return True
            self._recovering = False
        if self.revisits is not None:
            self.revisits.look()  # only the lock's holder: once per cluster
        entries = self._fill_batch()
        if entries:
            self._handle(entries)
            return True
        if not self.stopping and self._left_behind():
            return True
        if self.exit_when_empty and not self.stopping and self.queue.is_empty():
            logger.info("nothing left in %s, stopping", self.queue.keys.items)
            return False
        return True

    def _left_behind(self) -> bool:
        """Whether the processing list holds entries while this writer holds none
        (one LLEN per idle turn): a batch whose ack a replaced master took and
        the promoted replica never got. Written again (upserted) from its head;
        before, they stayed there until the next start."""
        left = self.queue.processing_length()
        if left:
            logger.info(
                "%d entries in %s were taken and never acknowledged (an acknowledgement"
                " Redis lost, as in a failover); writing them again",
                left,
                self.queue.keys.items_processing,
            )
            self._recovering = True
        return bool(left)

    def _acquire_lock(self) -> None:
        """Wait for the lock: its holder's release at a clean stop, or its TTL after a crash."""
        waiting = False
        while not self.queue.try_lock():
            if not waiting:
                logger.warning(
                    "another db_writer holds %s (%s); waiting for it to stop",
                    self.queue.lock,
                    self.queue.holder(),
                )
                waiting = True
            self.stop.sleep(self.config.idle_wait)
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

    def _lock_lost(self) -> None:
        """Drop the batch in hand (it stays in processing) and wait to hold the lock again.

        When another writer holds the lock, :meth:`_acquire_lock` says so.
        """
        self._have_lock = False
        self._in_hand = False
        if self.queue.holder() is None:
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
            if got:
                self._in_hand = True
            if got and not batch:
                deadline = time.monotonic() + self.config.max_wait
            batch.extend(got)
            if len(got) == want:
                continue
            if not batch:
                if self.exit_when_empty or not self.queue.wait(self.config.idle_wait):
                    break  # idle: let the caller check for stop and exit conditions
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self.queue.refresh_lock()
            self.queue.wait(min(remaining, self.config.idle_wait))
        return batch

    def _handle(self, entries: list[bytes]) -> None:
        """Write one batch of entries, then acknowledge all of them."""
        pages: list[PageEntry] | None = [] if self.pages is not None else None
        rows, rejected = parse_entries(entries, self.config.tables, pages)
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
        refused = self._write(dedupe(rows), self.store.write_batch)
        if refused:
            refused_ids = {row.identity for row, _ in refused}
            written = sum(1 for row in rows if row.identity not in refused_ids)
            for row, reason in refused:
                reject_raw.append(row.raw)
                logger.warning(
                    "the database refused the item %s %.200r in %s: %s; kept in %s",
                    row.item_type,
                    row.item_key,
                    row.table,
                    reason,
                    self.queue.keys.items_rejected,
                )
        if pages and self.pages is not None:
            pages.sort(key=lambda page: page.at)  # halves of a split batch stay in time order
            for page, reason in self._write(pages, self.pages.write):
                reject_raw.append(page.raw)
                logger.warning(
                    "the database refused the page entry of %.200r: %s; kept in %s",
                    page.url,
                    reason,
                    self.queue.keys.items_rejected,
                )
        self.queue.ack(len(entries), written, reject_raw)
        self._in_hand = False

    def _write(self, rows: list[T], write: Callable[[Sequence[T]], object]) -> list[tuple[T, str]]:
        """Write until the database takes the batch; return the rows it refused."""
        if not rows:
            return []
        attempt = 0
        while True:
            attempt += 1
            try:
                refused = self._write_isolating(rows, write)
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
                self._sleep_refreshing(self.db_backoff.next_delay())
                continue
            if self._db_down:
                logger.info("%s available again", self.store_name)
                self._db_down = False
                self.db_backoff.reset()
            return refused

    def _write_isolating(
        self, rows: Sequence[T], write: Callable[[Sequence[T]], object]
    ) -> list[tuple[T, str]]:
        """Write ``rows``; if a value is refused, split the batch until the culprits are alone."""
        try:
            write(rows)
            return []
        except RowsRefused as exc:
            if len(rows) == 1:
                return [(rows[0], str(exc))]
        middle = len(rows) // 2
        return self._write_isolating(rows[:middle], write) + self._write_isolating(
            rows[middle:], write
        )

    # --- helpers ------------------------------------------------------------------

    def _sleep_refreshing(self, seconds: float) -> None:
        """Sleep in slices, keeping the lock fresh; raise StopRequested at a stop request."""
        end = time.monotonic() + seconds
        while (remaining := end - time.monotonic()) > 0:
            self.queue.refresh_lock()
            self.stop.sleep(min(remaining, SLEEP_SLICE))

    def _shut_down(self) -> None:
        try:
            self.queue.release_lock()
        except RedisUnavailable:
            pass  # the lock expires by itself
        self.store.close()
        logger.info("stopped")
