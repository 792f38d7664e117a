"""A spider fed from Redis that keeps reading seeds while it has room.

scrapy-redis 0.9.1's ``RedisSpider`` reads seeds only when the engine goes
idle (``spider_idle``), through a blocking client, builds deprecated
``FormRequest`` seeds, and measures ``MAX_IDLE_TIME_BEFORE_CLOSE`` from process
start. On Scrapy >= 2.13 its ``start_requests`` is not even called. This
subclass reads seeds in Scrapy's async ``start()``: continuously, whenever the
engine has room, with the worker's asyncio client; and it closes only after
the whole cluster (not just this worker) has had nothing to do for the idle
time, counted from when this worker became idle.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy_redis.spiders import RedisSpider

from spiders_project.frontier.context import WorkerRedis
from spiders_project.frontier.scheduler import SEED_ENTRY
from spiders_project.redis_connection import CONNECTION_ERRORS
from spiders_project.seeds import InvalidSeed, Seed, parse_seed

logger = logging.getLogger(__name__)

# A seed seen again after this many claims never reached the frontier (a
# middleware dropped its request): it is rejected instead of retried forever.
SEED_ATTEMPTS = 3


class RedisSeedSpider(RedisSpider):
    """Base spider: seeds from ``<name>:start_urls``; subclasses define ``parse``."""

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> RedisSeedSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        spider.redis = WorkerRedis.of(crawler)
        return spider

    def setup_redis(self, crawler: Crawler | None = None) -> None:
        """Keep scrapy-redis' attribute names, without its client and idle hook."""
        assert crawler is not None
        settings = crawler.settings
        self.redis_key = WorkerRedis.of(crawler).keys.start_urls
        self.redis_batch_size = settings.getint("SEED_BATCH_SIZE")
        self.max_idle_time = settings.getint("MAX_IDLE_TIME_BEFORE_CLOSE")
        self.seed_poll_interval = settings.getfloat("SEED_POLL_INTERVAL")

    def make_request_from_seed(self, seed: Seed) -> Request:
        """The request for a seed; subclasses add their own meta."""
        return Request(
            seed.url,
            meta={**seed.meta, "seed": True},
            priority=seed.priority,
            dont_filter=True,
        )

    def make_request_from_data(self, data: bytes) -> Request:
        return self.make_request_from_seed(parse_seed(data))

    async def start(self) -> AsyncIterator[Any]:
        idle_since: float | None = None
        attempts: Counter[bytes] = Counter()
        while True:
            # Seeds go into the shared frontier, not straight to the
            # downloader, so they are read even while every slot is busy.
            entries = await self._peek_seeds()
            for raw in entries:
                attempts[raw] += 1
                if attempts[raw] > SEED_ATTEMPTS:
                    self._reject_seed(raw, "dropped before reaching the frontier")
                    continue
                try:
                    request = self.make_request_from_data(raw)
                except InvalidSeed as exc:
                    self._reject_seed(raw, str(exc))
                    continue
                request.meta[SEED_ENTRY] = raw.decode("latin-1")
                idle_since = None
                yield request
            if entries:
                # The claims (or rejects) reach Redis before we look again.
                await self.redis.batcher.wait_flushed()
                continue
            attempts.clear()
            if await self._cluster_is_idle():
                idle_since = idle_since or time.monotonic()
                idle = time.monotonic() - idle_since
                if self.max_idle_time and idle >= self.max_idle_time:
                    logger.info("Nothing to do in the cluster for %.0f s, closing", idle)
                    return
            else:
                idle_since = None
            await asyncio.sleep(self.seed_poll_interval)

    async def _peek_seeds(self) -> list[bytes]:
        """The oldest seeds, left in place: each is removed by the script that
        enqueues its request, so a worker that dies holding seeds loses none."""
        try:
            self.redis.round_trip()
            entries = await self.redis.client.lrange(self.redis_key, -self.redis_batch_size, -1)
        except CONNECTION_ERRORS as exc:
            await asyncio.sleep(self.redis.state.failed(exc))
            return []
        self.redis.state.ok()
        return entries[::-1]

    def _reject_seed(self, raw: bytes, reason: str) -> None:
        logger.error(
            "Rejected seed %.200r: %s (kept in %s)",
            raw,
            reason,
            self.redis.keys.start_urls_rejected,
        )
        self.crawler.stats.inc_value("seeds/rejected")
        self.redis.batcher.reject_seed(raw)

    async def _cluster_is_idle(self) -> bool:
        """True when this worker and every queue of the cluster are empty."""
        engine = self.crawler.engine
        scheduler = engine._slot.scheduler if engine._slot else None
        if engine.downloader.active or not engine.scraper.slot.is_idle():
            return False
        if scheduler is not None and hasattr(scheduler, "is_idle") and not scheduler.is_idle():
            return False
        keys = self.redis.keys
        try:
            self.redis.round_trip()
            async with self.redis.client.pipeline(transaction=False) as pipe:
                pipe.llen(keys.start_urls).get(keys.requests_size).zcard(keys.leases)
                sizes = await pipe.execute()
        except CONNECTION_ERRORS as exc:
            self.redis.state.failed(exc)
            return False
        return not any(int(size or 0) for size in sizes)

    def spider_idle(self) -> None:
        """Idle closing is decided in ``start()``; let Scrapy close when it ends."""
