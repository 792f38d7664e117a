"""The writer thread: builds and writes records off the reactor, and says what happened.

The reactor thread only copies each fetch into an :class:`~.records.Exchange`
and calls :meth:`ArchiveWriter.submit`, which never blocks: it returns False
when the bounded queue is full, and the caller then stops fetching until
there is room again (back-pressure, :mod:`.middleware`). This thread takes
exchanges in order, builds their records with warcio, gzips them and appends
them to the current file (:mod:`.files`), and reports each outcome through
``report`` (the middleware hands it to the reactor with ``callFromThread``).

A write that fails (a full disk, EIO, a directory gone read-only):

- ``pause`` (the default): the exchange is tried again every
  ``retry_interval`` seconds until it is written, while the worker fetches
  nothing (a page fetched and not archived counts as lost); nothing queued
  behind it is dropped or reordered;
- ``continue``: the exchange's records are dropped (counted) and the next
  exchange is tried, so archiving resumes by itself when writing works again.

Either way the first failure is reported as :class:`Failed` with
``first=True`` (one log line), every further failed attempt with
``first=False`` (counted only), and the first success at least
``retry_interval`` after the last failure as :class:`Restored`.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from spiders_project.archive.config import CONTINUE
from spiders_project.archive.files import WarcFiles
from spiders_project.archive.records import Exchange

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Written:
    records: int
    bytes: int


@dataclass(frozen=True)
class Failed:
    error: str
    first: bool  # the first failure since writing last worked
    fatal: bool = False  # the thread itself failed: nothing more is written


@dataclass(frozen=True)
class Dropped:
    records: int  # records not archived (WARC_ON_ERROR=continue, or a stop while failing)


@dataclass(frozen=True)
class Restored:
    pass


Event = Written | Failed | Dropped | Restored


class ArchiveWriter:
    """One thread per worker; ``submit`` on the reactor, the rest on the thread."""

    def __init__(
        self,
        files: WarcFiles,
        *,
        queue_size: int,
        on_error: str,
        report: Callable[[Event], None],
        retry_interval: float = 5.0,
    ) -> None:
        self.files = files
        self.on_error = on_error
        self.report = report
        self.retry_interval = retry_interval
        self.queue: queue.Queue[Exchange | None] = queue.Queue(maxsize=queue_size)
        self.failing = False
        self._failed_at = 0.0
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="warc-writer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def submit(self, exchange: Exchange) -> bool:
        """Queue ``exchange`` for writing; False (nothing queued) when the queue is full."""
        try:
            self.queue.put_nowait(exchange)
        except queue.Full:
            return False
        return True

    @property
    def room(self) -> int:
        return self.queue.maxsize - self.queue.qsize()

    def stop(self, timeout: float | None = None, more: Iterable[Exchange] = ()) -> bool:
        """Write what is queued, then ``more`` (a backlog), close the file, end the
        thread (blocking: call it off the reactor). A write still failing is given
        up (its records reported dropped). True if the thread ended within ``timeout``."""
        if not self._thread.is_alive():
            return True  # never started (the spider never opened), or already ended
        self._stopping.set()  # first: a failing write stops waiting, the queue drains
        for exchange in more:
            self.queue.put(exchange)
        self.queue.put(None)
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        try:
            while True:
                exchange = self.queue.get()
                if exchange is None:
                    break
                members = self.files.builder.exchange(exchange)
                self._write(members)
        except Exception:  # a bug, not an I/O error: say so, stop archiving
            logger.exception("The WARC writer thread failed")
            self.report(Failed("the writer thread failed (see the traceback above)", True, True))
            return
        try:
            self.files.close()
        except OSError as exc:
            logger.error("Could not close the last WARC file: %s", exc)

    def _write(self, members: list[bytes]) -> None:
        while True:
            try:
                records, size = self.files.append(members)
            except OSError as exc:
                self.report(Failed(f"{type(exc).__name__}: {exc}", not self.failing))
                self.failing = True
                self._failed_at = time.monotonic()
                if self.on_error == CONTINUE:
                    self.report(Dropped(len(members)))
                    return
                if self._stopping.wait(self.retry_interval):
                    self.report(Dropped(len(members)))
                    return
                continue
            # Restored once a write works retry_interval after the last failure: on
            # a nearly full disk a small record fits where a large one failed, and
            # one line per fetch saying so would flood the log.
            if self.failing and time.monotonic() - self._failed_at >= self.retry_interval:
                self.failing = False
                self.report(Restored())
            self.report(Written(records, size))
            return
