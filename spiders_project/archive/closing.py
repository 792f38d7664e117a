"""Closing the archive before the worker's last stats publish, whichever way it stops.

Scrapy runs the ``spider_closed`` handlers side by side, so the heartbeat's
last publish (``worker/heartbeat.py``) would race the writer thread's
last records, and a worker's final ``warc/*`` counts would miss them; and a
worker whose grace period ran out ends with ``os._exit`` after that publish,
without ``spider_closed`` at all, which would leave its file ``.open``. So
the archive registers how it closes here, and both the archive's own
``spider_closed`` handler and the last publish call :meth:`ArchiveClosing.close`:
the first call starts it, every call waits for it (bounded).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import suppress

from scrapy.crawler import Crawler

from spiders_project.plumbing.wiring import shared


class ArchiveClosing:
    def __init__(self) -> None:
        self._closer: Callable[[], Awaitable[None]] | None = None
        self._task: asyncio.Future[None] | None = None

    @classmethod
    def of(cls, crawler: Crawler) -> ArchiveClosing:
        return shared(crawler, cls, cls)

    def register(self, closer: Callable[[], Awaitable[None]]) -> None:
        """What closes the archive (its writer started); nothing to close before."""
        self._closer = closer

    async def close(self, timeout: float) -> None:
        """Close the archive once (at once when it is off), waiting at most ``timeout``."""
        if self._closer is None:
            return
        if self._task is None:
            self._task = asyncio.ensure_future(self._closer())
        with suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._task), timeout)
