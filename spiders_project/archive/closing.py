"""When the archive has finished at close, for the worker's last stats publish.

Scrapy runs the ``spider_closed`` handlers side by side, so the heartbeat's
last publish (``extensions/heartbeat.py``) would race the writer thread's
last records, and a worker's final ``warc/*`` counts would miss them. The
archive marks itself ``active`` when it starts and sets ``done`` once its
writer has stopped; the heartbeat waits for that (bounded) before publishing.
"""

from __future__ import annotations

import asyncio
from contextlib import suppress

from scrapy.crawler import Crawler

from spiders_project.wiring import shared


class ArchiveClosing:
    def __init__(self) -> None:
        self.active = False
        self.done = asyncio.Event()

    @classmethod
    def of(cls, crawler: Crawler) -> ArchiveClosing:
        return shared(crawler, cls, cls)

    async def wait(self, timeout: float) -> None:
        """Until the archive's writer has stopped (at once when the archive is off)."""
        if self.active:
            with suppress(TimeoutError):
                await asyncio.wait_for(self.done.wait(), timeout)
