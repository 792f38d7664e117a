"""``RedisSpider``: a spider fed from Redis that keeps reading seeds while it has room.

scrapy-redis 0.9.1's ``RedisSpider`` reads seeds only when the engine goes
idle (``spider_idle``), through a blocking client, builds deprecated
``FormRequest`` seeds, and measures ``MAX_IDLE_TIME_BEFORE_CLOSE`` from process
start. On Scrapy >= 2.13 its ``start_requests`` is not even called. This
subclass reads seeds in Scrapy's async ``start()``: continuously, whenever the
engine has room, with the worker's asyncio client; and it closes only after
the whole cluster (not just this worker) has had nothing to do for the idle
time, counted from when this worker became idle.

It keeps scrapy-redis' attribute names, so a spider written for scrapy-redis
runs after changing its import: ``redis_key`` (default ``<name>:start_urls``,
``%(name)s`` is replaced), ``redis_batch_size`` (default SEED_BATCH_SIZE),
``max_idle_time`` (default MAX_IDLE_TIME_BEFORE_CLOSE) and
``make_request_from_data(data)``, which gets the raw entry. Its own
``self.server`` (a blocking client) does not exist here.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import AsyncIterator
from typing import Any

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy_redis import spiders as scrapy_redis_spiders

from spiders_project.crawl.meta import JOB, PAGE_STATE, SCOPE_META, SEED, SEED_ENTRY
from spiders_project.frontier.config import FrontierConfig
from spiders_project.frontier.context import WorkerRedis
from spiders_project.insides import internals
from spiders_project.insides.scrapy_redis_compat import not_here
from spiders_project.keys.jobs import DEFAULT_JOB
from spiders_project.plumbing.pauses import EnginePauses
from spiders_project.read_model.contract import work_of, work_reads
from spiders_project.redis_access import RedisUnavailable
from spiders_project.scope.seeds import Seed, parse_seed, seed_reached
from spiders_project.spiders.sitemaps import sitemap_requests

logger = logging.getLogger(__name__)


# scrapy-redis ships no types, so its spider is Any to mypy.
class RedisSpider(scrapy_redis_spiders.RedisSpider):  # type: ignore[misc]
    """Seeds from ``<name>:start_urls`` (or ``redis_key``); subclasses define ``parse``."""

    # Its names (and its bases') are never callbacks read from Redis (frontier/codec/callbacks.py).
    _callback_machinery = True
    redis_batch_size: int | None = None
    max_idle_time: float | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> RedisSpider:
        spider: RedisSpider = super().from_crawler(crawler, *args, **kwargs)
        spider.redis = WorkerRedis.of(crawler)
        spider._reached = set()
        crawler.signals.connect(spider._seed_reached, signal=seed_reached)
        spider.redis.batcher.seeds_rejected.subscribe(spider._seed_rejected)
        return spider

    def _seed_reached(self, entry: bytes) -> None:
        self._reached.add(entry)

    def setup_redis(self, crawler: Crawler | None = None) -> None:
        """Keep scrapy-redis' attribute names, without its client and idle hook.

        As in scrapy-redis, a value the spider class sets wins over the setting.
        Called by scrapy-redis' ``from_crawler`` (twice for a CrawlSpider: it
        is idempotent).
        """
        assert crawler is not None
        config = FrontierConfig.from_settings(crawler.settings)
        self.redis_key = WorkerRedis.of(crawler).keys.start_urls
        if self.redis_batch_size is None:
            self.redis_batch_size = config.seed_batch_size
        if self.max_idle_time is None:
            self.max_idle_time = config.max_idle_time
        self._seed_batch = int(self.redis_batch_size)
        self._max_idle = float(self.max_idle_time)
        self.seed_spread = config.seed_spread
        self.seed_poll_interval = config.seed_poll_interval

    # RedisMixin's seed reading: a destructive pop through a client this
    # spider does not have (``self.server`` is never set), from the idle hook.
    # Seeds are read in ``start()`` instead.
    _SEEDS_INSTEAD = "seeds are read in start(), left in start_urls until enqueued"
    start_requests = not_here("RedisMixin.start_requests", _SEEDS_INSTEAD)
    next_requests = not_here("RedisMixin.next_requests", _SEEDS_INSTEAD)
    schedule_next_requests = not_here("RedisMixin.schedule_next_requests", _SEEDS_INSTEAD)
    pop_list_queue = not_here("RedisMixin.pop_list_queue", _SEEDS_INSTEAD)
    pop_priority_queue = not_here("RedisMixin.pop_priority_queue", _SEEDS_INSTEAD)

    def make_request_from_seed(self, seed: Seed) -> Request:
        """The request for a seed; subclasses add their own meta.

        A ``"sitemap": true`` seed is read by ``_parse_sitemap_seed``, which
        enqueues the pages its sitemap lists for ``parse``.
        """
        meta = {**seed.meta, SEED: True, **({SCOPE_META: seed.scope} if seed.scope else {})}
        if seed.job != DEFAULT_JOB:
            meta[JOB] = seed.job
        else:
            meta.pop(JOB, None)  # the seed's "job" says, not a "meta" it carries
        if seed.revisit is not None:
            meta[PAGE_STATE] = seed.revisit  # a revisit the db_writer pushed back
        return Request(
            seed.url,
            callback=self._parse_sitemap_seed if seed.sitemap else None,
            meta=meta,
            priority=seed.priority,
            dont_filter=True,
        )

    async def _parse_sitemap_seed(self, response: Response) -> AsyncIterator[Request]:
        """A sitemap seed's sitemap, sitemap index or robots.txt (``sitemaps.py``)."""
        async for request in sitemap_requests(self, response):
            yield request

    def make_request_from_data(self, data: bytes) -> Request:
        return self.make_request_from_seed(parse_seed(data))

    async def start(self) -> AsyncIterator[Any]:
        idle_since: float | None = None
        while True:
            # Seeds go into the shared frontier, not straight to the
            # downloader, so they are read even while every slot is busy.
            entries = await self._peek_seeds()
            yielded: list[bytes] = []
            self._reached.clear()
            for raw in entries:
                try:
                    request = self.make_request_from_data(raw)
                except Exception as exc:  # noqa: BLE001 - one bad seed harms only itself
                    self._reject_seed(raw, f"{type(exc).__name__}: {exc}")
                    continue
                request.meta[SEED_ENTRY] = raw.decode("latin-1")
                idle_since = None
                yielded.append(raw)
                yield request
            # The engine asks for the next request only after it scheduled
            # the previous one (or a spider middleware dropped it), so every
            # seed yielded above that did not reach the scheduler was dropped.
            # It would be read again forever: reject it instead.
            for raw in yielded:
                if raw not in self._reached:
                    self._reject_seed(raw, "dropped before reaching the frontier")
            if entries:
                # The claims (or rejects) reach Redis before we look again.
                await self.redis.batcher.wait_flushed()
                continue
            if await self._cluster_is_idle():
                idle_since = idle_since or time.monotonic()
                idle = time.monotonic() - idle_since
                if self._max_idle and idle >= self._max_idle:
                    logger.info("Nothing to do in the cluster for %.0f s, closing", idle)
                    held = EnginePauses.of(self.crawler).release_all()
                    if held:
                        logger.info("Fetching was paused by %s: released to close", ", ".join(held))
                    return
            else:
                idle_since = None
            await asyncio.sleep(self.seed_poll_interval)

    async def _peek_seeds(self) -> list[bytes]:
        """Some of the oldest seeds, left in place: each is removed by the script
        that enqueues its request, so a worker that dies holding seeds loses none.

        It reads the oldest SEED_BATCH_SIZE x SEED_SPREAD and picks
        SEED_BATCH_SIZE of them at random, so workers polling together mostly
        claim different seeds (each is claimed once, by the enqueue script,
        whoever reads it) and intake grows with the number of workers instead
        of every worker racing for the same oldest few; seeds stay roughly
        oldest first. Identical entries (a seed pushed twice) are read once per
        poll, and the next poll reads the copy left.
        """
        batch = self._seed_batch
        client = self.redis.client
        try:
            entries = await self.redis.calls.call(
                "LRANGE start_urls",
                lambda: client.lrange(self.redis_key, -batch * self.seed_spread, -1),
                retry=False,
                writes=False,
            )
        except RedisUnavailable as exc:
            await asyncio.sleep(exc.delay)
            return []
        distinct = list(dict.fromkeys(reversed(entries)))  # oldest first
        if len(distinct) > batch:
            chosen = sorted(random.sample(range(len(distinct)), batch))
            distinct = [distinct[i] for i in chosen]
        return distinct

    def _reject_seed(self, raw: bytes, reason: str) -> None:
        self.redis.batcher.reject_seed(raw, reason)

    def _seed_rejected(self, raw: bytes, reason: str) -> None:
        """Log and count a seed once it is in start_urls:rejected.

        Only the worker whose reject moved it hears of it: two workers that
        read the same bad seed would otherwise log and count it twice.
        """
        logger.error(
            "Rejected seed %.200r: %s (kept in %s)",
            raw,
            reason,
            self.redis.keys.start_urls_rejected,
        )
        self.crawler.stats.inc_value("seeds/rejected")

    async def _cluster_is_idle(self) -> bool:
        """True when this worker and every queue of the cluster are empty."""
        engine = self.crawler.engine
        scheduler = internals.scheduler_of(engine)
        if engine.downloader.active or not internals.scraper_is_idle(engine):
            return False
        if scheduler is not None and hasattr(scheduler, "is_idle") and not scheduler.is_idle():
            return False
        try:
            replies = await self.redis.pipelined(
                "idle check", work_reads(self.redis.keys), retry=False
            )
        except RedisUnavailable:
            return False
        return work_of(replies, self.redis.keys).idle

    def spider_idle(self) -> None:
        """Idle closing is decided in ``start()``; let Scrapy close when it ends."""
