"""The revisit scheduler: due rows of ``pages`` back into the frontier, once per cluster.

With RECRAWL_AFTER set, every URL whose ``next_due`` has come is fetched
again, whether or not a page links to it again. Every db_writer of the
spider looks every RECRAWL_SCHEDULE_EVERY seconds: it reads up to
RECRAWL_SCHEDULE_BATCH due rows (``FOR UPDATE SKIP LOCKED`` on PostgreSQL, so
two writers never read the same row; SQLite's write transaction is the whole
file's), pushes each as a JSON seed onto ``<spider>:start_urls``::

    {"url": "https://...", "job": "...", "revisit": {"etag": ..., "last_modified": ...,
     "digest": ..., "fetched_at": ..., "interval": ..., "changes": ..., "failures": ...}}

and moves its due time by its interval, in the transaction that read it,
committed after the push. A seed is always fetched, seen or not, so the
revisit passes the seen-set for that one URL only; ``"revisit"`` becomes
``meta.PAGE_STATE`` (its validators for the conditional request). The
fetch's page-state entry then sets the next due time from its own time.

Redis holds a revisit only while it waits in start_urls: nothing per URL
between visits. Due times and validators live in the database.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime

from spiders_project.db_writer.page_store import PageTable
from spiders_project.db_writer.sql_store import RowsRefused, StoreUnavailable
from spiders_project.keys import RedisKeys
from spiders_project.recrawl.config import RecrawlConfig
from spiders_project.recrawl.pages_row import PageRow, revisit_seed
from spiders_project.redis_access import RedisUnavailable, SyncRedisCalls

logger = logging.getLogger(__name__)


class RevisitScheduler:
    """Pushes due URLs back, at most once per RECRAWL_SCHEDULE_EVERY (see the module)."""

    def __init__(
        self,
        table: PageTable,
        calls: SyncRedisCalls,
        keys: RedisKeys,
        config: RecrawlConfig,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.table = table
        self.calls = calls
        self.keys = keys
        self.config = config
        self._monotonic = monotonic
        self._next_look = float("-inf")
        self._failing = False
        self.pushed = 0

    def now(self) -> datetime:
        """Redis' clock: the one the workers stamp their fetches with."""
        seconds, micros = self.calls.command("TIME", writes=False)
        return datetime.fromtimestamp(int(seconds) + int(micros) / 1e6, UTC)

    def look(self) -> int:
        """Push the due rows if it is time to look; how many were pushed.

        A database that fails, or a push Redis refuses, is said once and tried
        at the next look, the rows still due; Redis away goes to the caller,
        whose loop waits for it.
        """
        if not self.config.revisits or self._monotonic() < self._next_look:
            return 0
        self._next_look = self._monotonic() + self.config.schedule_every
        try:
            try:
                due = self._take_due()
            except StoreUnavailable:
                # A connection the server dropped while idle (or SQLite's, opened
                # in the thread that started the writer) fails once: reconnected.
                due = self._take_due()
        except (StoreUnavailable, RowsRefused) as exc:
            return self._failed("cannot read the due pages", exc)
        except RedisUnavailable as exc:
            if not self.calls.state.connected:
                raise  # Redis is away: the writer's loop waits for it
            # Writes refused (Redis full, a read-only replica): the items still
            # go on (the db_writer is what frees Redis), the revisits wait.
            return self._failed(f"cannot push the due pages to {self.keys.start_urls}", exc)
        if self._failing:
            logger.info("revisits: pushing due pages again")
            self._failing = False
        if due:
            logger.debug("revisits: %d due pages pushed to %s", len(due), self.keys.start_urls)
        self.pushed += len(due)
        return len(due)

    def _take_due(self) -> list[PageRow]:
        return self.table.take_due(self.now(), self.config.schedule_batch, self._push)

    def _failed(self, what: str, exc: Exception) -> int:
        """Say it once; the rows stay due and the next look tries again."""
        if not self._failing:
            cause = exc.__cause__ or exc
            logger.error("revisits: %s, retrying: %s: %s", what, type(cause).__name__, cause)
            self._failing = True
        return 0

    def _push(self, rows: list[PageRow]) -> None:
        # Tried once, inside the transaction: a failure rolls the move back, and
        # the writer's loop waits for Redis. A reply lost after the push made it
        # pushes these rows twice at the next look: a duplicate fetch, no loss.
        entries = [revisit_seed(row) for row in rows]
        self.calls.command("LPUSH", self.keys.start_urls, *entries, retry=False)
