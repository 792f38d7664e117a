"""One writer thread per spider in one db_writer process, and nothing dies quietly.

Each spider's :class:`~.writer.ItemWriter` runs in its own thread with its own
database connection, so a slow or locked table of one spider never holds up
another, and each joins its own spider's writers as a lone writer does. The main
thread only starts writers (for ``--all-spiders``, those of spiders that
appear in the set ``spiders``), relays stop signals and watches: a writer
thread that raises is logged and ends the process with status 1, after the
others finished their batch in hand, so the supervisor restarts it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import redis

from spiders_project.db_writer.sql_store import StoreUnavailable
from spiders_project.db_writer.writer import ItemWriter
from spiders_project.redis_access import RedisUnavailable

logger = logging.getLogger("spiders_project.db_writer")

# The longest the main thread waits between looks at its writer threads, in
# seconds; a writer that ends wakes it at once.
WATCH_INTERVAL = 1.0


class _Thread:
    """A writer and the thread running it; ``error`` is set if ``run`` raised."""

    def __init__(self, spider: str, writer: ItemWriter, ended: threading.Event) -> None:
        self.spider = spider
        self.writer = writer
        self.error: BaseException | None = None
        self._ended = ended
        self.thread = threading.Thread(target=self._run, name=f"db_writer {spider}", daemon=True)

    def _run(self) -> None:
        try:
            self.writer.run()
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            self.error = exc
        finally:
            self._ended.set()


class WriterPool:
    """Starts, watches and stops the writer threads of one process."""

    def __init__(self, make_writer: Callable[[str], ItemWriter]) -> None:
        self.make_writer = make_writer
        self.threads: dict[str, _Thread] = {}
        self._stop_signal: int | None = None
        self._unavailable: set[str] = set()
        # Set by a writer thread as it ends (and by a stop request): wakes run().
        self._wake = threading.Event()

    def start(self, spider: str) -> None:
        """Start the writer of ``spider``; raises StoreUnavailable if its database is not there."""
        if spider in self.threads:
            return
        worker = _Thread(spider, self.make_writer(spider), self._wake)
        self.threads[spider] = worker
        if self._stop_signal is not None:
            worker.writer.request_stop(self._stop_signal)
        worker.thread.start()
        logger.info("writing the items of spider %s", spider)

    def request_stop(self, signum: int | None = None) -> None:
        """Every writer finishes its batch in hand, then stops (safe from a signal handler)."""
        if signum is not None:
            self._stop_signal = signum
        for worker in self.threads.values():
            worker.writer.request_stop(signum)
        self._wake.set()

    def run(
        self,
        discover: Callable[[], list[str]] | None,
        poll: float,
        exit_when_empty: bool,
    ) -> int:
        """Watch the writers until all have stopped; 1 if one died, else 0."""
        next_look = 0.0
        while True:
            self._wake.clear()
            failed = [w for w in self.threads.values() if w.error is not None]
            if failed:
                return self._died(failed[0])
            stopping = self._stop_signal is not None
            if discover is not None and not stopping and time.monotonic() >= next_look:
                next_look = time.monotonic() + poll
                self._discover(discover)
            alive = [w for w in self.threads.values() if w.thread.is_alive()]
            if not alive and (stopping or exit_when_empty) and self._settled(discover):
                return 0
            timeout = WATCH_INTERVAL
            if discover is not None and not stopping:
                timeout = max(0.0, min(timeout, next_look - time.monotonic()))
            # Interrupted by signals (their handlers run, then request_stop wakes it).
            self._wake.wait(timeout)

    def _settled(self, discover: Callable[[], list[str]] | None) -> bool:
        """With --all-spiders and --exit-when-empty, no spider appeared since the last look."""
        if discover is None or self._stop_signal is not None:
            return True
        before = set(self.threads)
        self._discover(discover)
        return set(self.threads) == before and not self._unavailable

    def _discover(self, discover: Callable[[], list[str]]) -> None:
        try:
            spiders = discover()
        except RedisUnavailable:
            return  # the call path logged it; the next look tries again
        for spider in spiders:
            if spider in self.threads:
                continue
            try:
                self.start(spider)
                self._unavailable.discard(spider)
            except StoreUnavailable as exc:
                if spider not in self._unavailable:
                    logger.error("cannot open the database for spider %s: %s", spider, exc)
                    self._unavailable.add(spider)

    def _died(self, dead: _Thread) -> int:
        error = dead.error
        if isinstance(error, redis.RedisError):
            # A caller's error (a key of the wrong type, say): the call path
            # logged the command; retrying cannot help.
            logger.critical(
                "stopping: Redis refused a call the db_writer of %s needs (%s)", dead.spider, error
            )
        else:
            logger.critical("stopping: the writer of spider %s died", dead.spider, exc_info=error)
        self.request_stop()
        for worker in self.threads.values():
            worker.thread.join()
        return 1
