"""The db_writer loop: Redis item buffer in, database rows out, nothing lost.

Any number of writers drain a spider's buffer at once (:class:`ItemQueue`):
each takes a batch into its own processing list, writes it in one
transaction, then acknowledges it. A writer that dies leaves its batch in its
processing list; another writer takes it over once the dead one's lease has
expired (DB_WRITER_LOCK_TTL) and writes it first, as an upsert.

Stopping is warm on the first SIGTERM: the batch in hand is committed and
acknowledged. A stop requested while the writer waits for Redis (away, or
refusing writes) or for the database ends the wait at once and leaves the
batch in the processing list, where another writer (or the next start) takes
it over; a second SIGTERM kills.
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple, TypeVar

from spiders_project.db_writer.config import WriterConfig
from spiders_project.db_writer.entries import dedupe, parse_entries
from spiders_project.db_writer.item_queue import ItemQueue, LeaseLost
from spiders_project.db_writer.page_store import PageTable
from spiders_project.db_writer.revisits import RevisitScheduler
from spiders_project.db_writer.sql_store import RowsRefused, Store, StoreUnavailable
from spiders_project.db_writer.stopping import SLEEP_SLICE, Backoff, StopFlag, StopRequested
from spiders_project.keys import RedisKeys
from spiders_project.recrawl.pages_row import PageEntry
from spiders_project.redis_access import RedisUnavailable

__all__ = ["Backoff", "ItemWriter", "StopFlag", "StopRequested", "WriterConfig"]

logger = logging.getLogger(__name__)
T = TypeVar("T")
# While --exit-when-empty waits for another writer's batch (its ack, or its
# lease to expire so it can be taken over), it looks this often.
PEERS_POLL = 0.2
# A writer filling a batch takes again this many times per DB_WRITER_MAX_WAIT,
# sleeping between, rather than waking at each push to the buffer: each take
# is one script call, and a crawl pushes its items a few at a time from every
# worker. So a batch that fills early is written at most a quarter of
# DB_WRITER_MAX_WAIT late.
FILL_TAKES = 4


class Batch(NamedTuple):
    """Entries taken from one buffer, the first of this writer's processing list there."""

    buffer: RedisKeys
    entries: list[bytes]


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
        self._joined = False
        self._db_down = False
        self._next_buffer = 0  # the buffer the next batch is taken from first
        # Entries taken into the processing list and not acknowledged yet, and
        # the buffer beside which that list is (the last batch's), for the lines.
        self._in_hand = False
        self._buffer = queue.buffers[0]
        # What this writer committed and acknowledged, said at its stop: the
        # share of each of several writers of a buffer.
        self.items_written = 0
        self.batches = 0

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
                    " it stays in %s for another writer",
                    self.queue.processing(self._buffer),
                )
        self._shut_down()

    def _turn(self) -> bool:
        """Join the writers if needed, then handle one batch. False when the writer should stop.

        Raises :class:`StopRequested` when a stop is requested while it waits.
        """
        try:
            if not self._joined:
                self._join()
            return self._step()
        except LeaseLost:
            self._lease_lost()
        except RedisUnavailable as exc:
            # A take or ack whose reply was lost may have moved entries: whatever
            # is in the processing list is read again from its head. The call
            # path logged the state change; the next calls (a heartbeat
            # first) retry with its backoff until Redis answers and takes writes.
            self._recovering = True
            self.queue.forget_heartbeat()
            self.stop.sleep(exc.delay)
        return True

    def _step(self) -> bool:
        """Handle one batch (or one idle wait). False when the writer should stop."""
        if self.stopping:
            return False
        self.queue.heartbeat()
        if self.queue.take_over_gone():
            self._recovering = True
        if self._recovering:
            for buffer in self.queue.buffers:
                entries = self.queue.read_processing(buffer, self.config.batch_size)
                if entries:
                    self._in_hand, self._buffer = True, buffer
                    self._handle(Batch(buffer, entries))
                    return True
            self._recovering = False
        if self.revisits is not None:
            # Every writer looks; the due rows are locked as they are read
            # (page_store.take_due), so two writers never push the same one.
            self.revisits.look()
        batch = self._fill_batch()
        if batch is not None:
            self._handle(batch)
            return True
        if not self.stopping and self._left_behind():
            return True
        if self.exit_when_empty and not self.stopping:
            if self.queue.is_empty():
                logger.info("nothing left in %s, stopping", self.queue.buffer_names)
                return False
            # Another writer holds a batch: wait for its ack, or for its lease
            # to expire, when this writer takes the batch over.
            self.stop.sleep(PEERS_POLL)
        return True

    def _left_behind(self) -> bool:
        """Whether this writer's processing list holds entries while it holds none
        (one LLEN per idle turn): a batch whose ack a replaced master took and
        the promoted replica never got. Written again (upserted) from its head."""
        left = self.queue.processing_length()
        if left:
            logger.info(
                "%d entries in %s were taken and never acknowledged (an acknowledgement"
                " Redis lost, as in a failover); writing them again",
                left,
                self.queue.processing(self._buffer),
            )
            self._recovering = True
        return bool(left)

    def _join(self) -> None:
        """Become one of the buffer's writers; then take over the batches of gone ones."""
        held = self.queue.join()
        self._joined = True
        self._recovering = True
        logger.info("joined the db_writers of %s as %s", self.queue.buffer_names, self.queue.writer)
        if held:
            logger.info("recovering %d entries left in this writer's processing list", held)

    def _lease_lost(self) -> None:
        """Drop the batch in hand (another writer took it over) and join again."""
        self._joined = False
        self._in_hand = False
        logger.warning(
            "another db_writer took over this one's batch (its lease %s expired: this writer"
            " stalled, or Redis lost it); dropping the batch in hand and joining again",
            self.queue.lease(self._buffer),
        )

    def _fill_batch(self) -> Batch | None:
        """Take entries until the batch is full or DB_WRITER_MAX_WAIT passed since the first.

        An idle writer blocks on the buffer until an entry comes; once it holds
        some, it takes again FILL_TAKES times per DB_WRITER_MAX_WAIT, and the
        other writers leave the buffer to it meanwhile (``take.lua``): a trickle
        of items costs Redis as many takes, and the database as many
        transactions, with any number of writers as with one. A batch comes
        from one buffer (its ack is one script in that buffer's slot); buffers
        are tried in turn, from the one after the last batch's.
        """
        size = self.config.batch_size
        buffers = self.queue.buffers
        entries: list[bytes] = []
        buffer: RedisKeys | None = None
        deadline = 0.0
        while len(entries) < size and not self.stopping:
            want = size - len(entries)
            others_filling = False
            if buffer is None:
                buffer, got, others_filling = self._take_any(want)
            else:
                got = self.queue.take(buffer, want).entries
            if got and buffer is not None:
                self._in_hand, self._buffer = True, buffer
                if not entries:
                    deadline = time.monotonic() + self.config.max_wait
                entries.extend(got)
            if len(got) == want:
                continue
            if buffer is None or not entries:
                if others_filling and not self.exit_when_empty:
                    # The other writer's mark lasts DB_WRITER_MAX_WAIT at most;
                    # if the buffer outgrows its batch meanwhile, its takes come
                    # back full, it marks nothing more, and this writer's next
                    # take is full too.
                    self._pause(self.config.max_wait)
                    break
                waiting_on = buffers[self._next_buffer % len(buffers)]
                if self.exit_when_empty or not self.queue.wait(waiting_on, self.config.idle_wait):
                    break  # idle: let the caller check for stop and exit conditions
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self.queue.heartbeat()
            self._pause(min(remaining, self.config.max_wait / FILL_TAKES))
        return Batch(buffer, entries) if buffer is not None and entries else None

    def _pause(self, seconds: float) -> None:
        """Sleep in slices until ``seconds`` passed or a stop is requested (the
        batch being filled is then written: a warm stop)."""
        end = time.monotonic() + seconds
        while not self.stopping and (remaining := end - time.monotonic()) > 0:
            time.sleep(min(remaining, SLEEP_SLICE))

    def _take_any(self, want: int) -> tuple[RedisKeys | None, list[bytes], bool]:
        """Up to ``want`` entries of the first buffer, in turn, that has some; and
        whether every buffer is being filled by another writer."""
        buffers = self.queue.buffers
        others_filling = True
        for step in range(len(buffers)):
            index = (self._next_buffer + step) % len(buffers)
            taken = self.queue.take(buffers[index], want, fill_for=self.config.max_wait)
            if taken.entries:
                self._next_buffer = index + 1
                return buffers[index], taken.entries, False
            others_filling = others_filling and taken.others_filling
        return None, [], others_filling

    def _handle(self, batch: Batch) -> None:
        """Write one batch of entries, then acknowledge all of them."""
        entries, buffer = batch.entries, batch.buffer
        pages: list[PageEntry] | None = [] if self.pages is not None else None
        rows, rejected = parse_entries(entries, self.config.tables, pages, self.store.CHECKS_JSON)
        reject_raw = [entry.raw for entry in rejected]
        for entry in rejected:
            logger.warning(
                "rejected an entry of %s: %s; kept in %s: %s",
                buffer.items,
                entry.reason,
                buffer.items_rejected,
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
                    buffer.items_rejected,
                )
        if pages and self.pages is not None:
            pages.sort(key=lambda page: page.at)  # halves of a split batch stay in time order
            for page, reason in self._write(pages, self.pages.write):
                reject_raw.append(page.raw)
                logger.warning(
                    "the database refused the page entry of %.200r: %s; kept in %s",
                    page.url,
                    reason,
                    buffer.items_rejected,
                )
        if not self.queue.ack(buffer, entries, written, reject_raw):
            logger.warning("%s holds entries before the batch; reading it again", buffer.items)
            self._recovering = True
        self._in_hand = False
        self.items_written += written
        self.batches += 1

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
                        self.queue.processing(self._buffer),
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
        """Sleep in slices, keeping the lease fresh; raise StopRequested at a stop request."""
        end = time.monotonic() + seconds
        while (remaining := end - time.monotonic()) > 0:
            self.queue.heartbeat()
            self.stop.sleep(min(remaining, SLEEP_SLICE))

    def _shut_down(self) -> None:
        if self._joined:
            try:
                left = self.queue.leave()
                if left:
                    logger.info("%d entries left for another db_writer to take over", left)
            except RedisUnavailable:
                pass  # the lease expires by itself
        self.store.close()
        logger.info("%d items written in %d batches; stopped", self.items_written, self.batches)
