"""A SIGTERM drains within a grace period, then hands back what is left."""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.settings import BaseSettings

from spiders_project.config import SettingsReader
from spiders_project.insides import internals
from spiders_project.plumbing.tasks import stop_tasks

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ShutdownConfig:
    """``SHUTDOWN_GRACE_PERIOD``, read once and checked."""

    grace: float  # seconds the requests in flight get after a SIGTERM (0: none)

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> ShutdownConfig:
        return cls(grace=SettingsReader(settings).getfloat("SHUTDOWN_GRACE_PERIOD", minimum=0))


class GracefulShutdown:
    """Bounds Scrapy's graceful stop by ``SHUTDOWN_GRACE_PERIOD`` seconds.

    On the first SIGTERM Scrapy stops taking requests and waits, without a
    limit, for the ones in flight; a hung site would keep the worker from
    stopping until supervisor kills it. We log the drain, and when the grace
    period is over we hand every unfinished lease back to the queue (the
    scheduler does it) and exit 0: another worker fetches those requests.
    """

    def __init__(self, crawler: Crawler, grace: float) -> None:
        self.crawler = crawler
        self.grace = grace
        self._task: asyncio.Task[None] | None = None
        self._drain_logged = False
        crawler.signals.connect(self._opened, signal=signals.spider_opened)
        crawler.signals.connect(self._closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> GracefulShutdown:
        return cls(crawler, ShutdownConfig.from_settings(crawler.settings).grace)

    def _opened(self) -> None:
        self._task = asyncio.ensure_future(self._watch())

    async def _closed(self, reason: str) -> None:
        if self._task is not None and self._task is not asyncio.current_task():
            await stop_tasks([self._task])
        if reason == "shutdown" and not self._drain_logged:
            # The drain ended before the watcher's next look.
            self._log_drain(0)
        logger.info("Worker stopped (%s)", reason)

    def _log_drain(self, in_flight: int) -> None:
        self._drain_logged = True
        logger.info(
            "Draining: finishing %d requests in flight (grace period %.0f s)",
            in_flight,
            self.grace,
        )

    async def _watch(self) -> None:
        engine = self.crawler.engine
        while not engine.running:  # spider_opened comes before the engine starts
            await asyncio.sleep(0.05)
        while engine.running:
            await asyncio.sleep(0.05)
        self._log_drain(len(engine.downloader.active))
        await asyncio.sleep(self.grace)
        scheduler = internals.scheduler_of(engine)
        left = len(engine.downloader.active)
        logger.warning("Grace period over: handing back %d unfinished requests", left)
        if scheduler is not None and hasattr(scheduler, "hand_back"):
            await scheduler.hand_back()
        # os._exit skips spider_closed: let the stats publisher sign off first,
        # or the monitor reports this worker as lost.
        for extension in self.crawler.extensions.middlewares:
            sign_off = getattr(extension, "sign_off", None)
            if sign_off is not None:
                await sign_off("grace period over")
        logger.info("Worker stopped (grace period over)")
        logging.shutdown()
        os._exit(0)
