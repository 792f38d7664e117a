"""Stop fetching while the item buffer is over its bound (db_writer slow or down)."""

from __future__ import annotations

import asyncio
import logging

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured

from spiders_project.frontier.context import WorkerRedis
from spiders_project.frontier.tasks import stop_tasks
from spiders_project.redis_connection import CONNECTION_ERRORS

logger = logging.getLogger(__name__)


class ItemBackpressure:
    """Pauses the engine while ``<spider>:items`` holds more than ``ITEM_BUFFER_MAX``.

    Without it a stopped db_writer lets Redis grow until it runs out of
    memory. The buffer length rides along with every write transaction of the
    worker (no extra round trip) and is checked as soon as each reply lands,
    so the bound is overshot by at most about one flush of items plus the
    requests in flight; while paused, it is read once a second. Fetching
    resumes below ``ITEM_BUFFER_RESUME`` times the bound.
    """

    def __init__(self, crawler: Crawler, redis: WorkerRedis, limit: int, resume: float) -> None:
        self.crawler = crawler
        self.redis = redis
        self.limit = limit
        self.resume_below = int(limit * resume)
        self.paused = False
        self._task: asyncio.Task[None] | None = None
        crawler.signals.connect(self._opened, signal=signals.spider_opened)
        crawler.signals.connect(self._closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ItemBackpressure:
        limit = crawler.settings.getint("ITEM_BUFFER_MAX")
        if limit <= 0:
            raise NotConfigured("ITEM_BUFFER_MAX is 0")
        return cls(
            crawler,
            WorkerRedis.of(crawler),
            limit,
            crawler.settings.getfloat("ITEM_BUFFER_RESUME"),
        )

    def _opened(self) -> None:
        self.redis.batcher.on_backlog = self._check
        self._task = asyncio.ensure_future(self._watch())

    def _check(self, backlog: int) -> None:
        """Pause as soon as a flush reports the buffer over the bound."""
        if not self.paused and backlog > self.limit:
            self._pause(backlog)

    def _pause(self, backlog: int) -> None:
        self.paused = True
        self.crawler.engine.pause()
        logger.warning(
            "Backpressure: %d items waiting in %s (limit %d), pausing fetching",
            backlog,
            self.redis.keys.items,
            self.limit,
        )

    async def _closed(self) -> None:
        if self._task is not None:
            await stop_tasks([self._task])

    async def _watch(self) -> None:
        batcher = self.redis.batcher
        while True:
            await asyncio.sleep(1.0 if self.paused else 0.2)
            backlog = batcher.items_backlog
            if self.paused:
                try:
                    self.redis.round_trip()
                    backlog = batcher.items_backlog = await self.redis.client.llen(
                        self.redis.keys.items
                    )
                except CONNECTION_ERRORS:
                    continue
            engine = self.crawler.engine
            if not self.paused and backlog > self.limit:
                self._pause(backlog)
            elif self.paused and backlog <= self.resume_below:
                self.paused = False
                engine.unpause()
                slot = getattr(engine, "_slot", None)
                if slot is not None:
                    slot.nextcall.schedule()
                logger.info("Backpressure: %d items waiting, resuming fetching", backlog)
