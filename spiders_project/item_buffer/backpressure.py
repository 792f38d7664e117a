"""Stop fetching while the item buffer is over its bound (db_writer slow or down)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.settings import BaseSettings

from spiders_project.config import SettingsReader
from spiders_project.frontier.context import WorkerRedis
from spiders_project.keys.db_writers import item_buffers
from spiders_project.plumbing.pauses import EnginePauses
from spiders_project.plumbing.tasks import spawn_loop, stop_tasks
from spiders_project.redis_access import RedisUnavailable

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BackpressureConfig:
    """``ITEM_BUFFER_*``: the bound, where fetching resumes, how often to look."""

    limit: int  # 0: no bound, the extension is off
    resume: float
    check_interval: float
    paused_check_interval: float

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> BackpressureConfig:
        read = SettingsReader(settings)
        resume = read.getfloat("ITEM_BUFFER_RESUME", minimum=0)
        read.check(resume <= 1, "ITEM_BUFFER_RESUME", "must be a fraction of ITEM_BUFFER_MAX (0-1)")
        return cls(
            limit=read.getint("ITEM_BUFFER_MAX", minimum=0),
            resume=resume,
            check_interval=read.getfloat("ITEM_BUFFER_CHECK_INTERVAL", above=0),
            paused_check_interval=read.getfloat("ITEM_BUFFER_PAUSED_CHECK_INTERVAL", above=0),
        )


class ItemBackpressure:
    """Pauses the engine while the item buffers hold more than ``ITEM_BUFFER_MAX``.

    Without it a stopped db_writer lets Redis grow until it runs out of
    memory. The bound is on the items of every buffer together
    (``keys/db_writers.item_buffers``: the spider's own, and each frontier
    shard's on a sharded frontier). A buffer's length rides along with the
    write transactions of the worker that push to it (no extra round trip;
    the spider's own at every one), and their sum is checked as soon as each
    reply lands; items that would pass the bound are flushed at once, not at
    the next tick, so the bound is overshot by about the requests in flight;
    while paused, every buffer is read once a second. Fetching resumes below
    ``ITEM_BUFFER_RESUME`` times the bound.
    """

    def __init__(self, crawler: Crawler, redis: WorkerRedis, config: BackpressureConfig) -> None:
        self.crawler = crawler
        self.redis = redis
        self.config = config
        self.limit = config.limit
        self.resume_below = int(config.limit * config.resume)
        self.paused = False
        # Fetching resumes only once no other holder (node health) pauses it.
        self.pauses = EnginePauses.of(crawler)
        self.buffers = item_buffers(redis.keys)
        self._task: asyncio.Task[None] | None = None
        crawler.signals.connect(self._opened, signal=signals.spider_opened)
        crawler.signals.connect(self._closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ItemBackpressure:
        config = BackpressureConfig.from_settings(crawler.settings)
        if config.limit == 0:
            raise NotConfigured("ITEM_BUFFER_MAX is 0")
        return cls(crawler, WorkerRedis.of(crawler), config)

    def _opened(self) -> None:
        self.redis.batcher.backlog.subscribe(self._check)
        self.redis.batcher.items_limit = self.limit
        self._task = spawn_loop("backpressure watch", self._watch())

    def _check(self, backlog: int) -> None:
        """Pause as soon as a flush reports the buffer over the bound."""
        if not self.paused and backlog > self.limit:
            self._pause(backlog)

    def _pause(self, backlog: int) -> None:
        self.paused = True
        self.pauses.hold("backpressure")
        logger.warning(
            "Backpressure: %d items waiting in %s (limit %d), pausing fetching",
            backlog,
            self.redis.keys.items if len(self.buffers) == 1 else "the item buffers",
            self.limit,
        )

    async def _closed(self) -> None:
        if self._task is not None:
            await stop_tasks([self._task])

    async def _watch(self) -> None:
        batcher = self.redis.batcher
        while True:
            config = self.config
            await asyncio.sleep(
                config.paused_check_interval if self.paused else config.check_interval
            )
            if self.paused:
                try:
                    lengths = await self.redis.pipelined(
                        "LLEN items",
                        [("LLEN", buffer.items) for buffer in self.buffers],
                        retry=False,
                    )
                except RedisUnavailable:
                    continue
                for buffer, length in zip(self.buffers, lengths, strict=True):
                    batcher.observe_backlog(buffer.frontier_prefix, int(length))
            backlog = batcher.items_backlog
            if not self.paused and backlog > self.limit:
                self._pause(backlog)
            elif self.paused and backlog <= self.resume_below:
                self.paused = False
                self.pauses.release("backpressure")
                logger.info("Backpressure: %d items waiting, resuming fetching", backlog)
