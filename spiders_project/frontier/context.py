"""The Redis side of one worker: a single asyncio client, its connection state
and the write batcher, shared by the scheduler, the seed reader and the item
pipeline so that all their writes travel in one ordered transaction per tick.
"""

from __future__ import annotations

import logging
import weakref

import redis.asyncio
from scrapy.crawler import Crawler

from spiders_project.frontier.batcher import RedisBatcher
from spiders_project.frontier.connection_state import ConnectionState
from spiders_project.frontier.scripts import FrontierScripts
from spiders_project.keys import RedisKeys
from spiders_project.redis_connection import async_client

logger = logging.getLogger("spiders_project.redis")

_contexts: weakref.WeakKeyDictionary[Crawler, WorkerRedis] = weakref.WeakKeyDictionary()


class WorkerRedis:
    """Everything a worker process uses to talk to the shared Redis."""

    def __init__(
        self,
        client: redis.asyncio.Redis,
        keys: RedisKeys,
        state: ConnectionState,
        flush_interval: float,
        crawler: Crawler | None = None,
    ) -> None:
        self.client = client
        self.keys = keys
        self.state = state
        self._crawler = crawler
        self.scripts = FrontierScripts(client)
        self.batcher = RedisBatcher(client, keys, state, flush_interval)
        self.batcher.on_round_trip = self.round_trip

    def round_trip(self) -> None:
        """Count one request/reply exchange with Redis (stat ``redis/round_trips``)."""
        if self._crawler is not None:
            self._crawler.stats.inc_value("redis/round_trips")

    @classmethod
    def of(cls, crawler: Crawler) -> WorkerRedis:
        """The context of this crawler, created on first use."""
        ctx = _contexts.get(crawler)
        if ctx is None:
            settings = crawler.settings
            assert crawler.spidercls is not None
            ctx = cls(
                client=async_client(settings),
                keys=RedisKeys(crawler.spidercls.name),
                state=ConnectionState(
                    settings.get("REDIS_URL"),
                    settings.getfloat("REDIS_RECONNECT_BACKOFF"),
                    settings.getfloat("REDIS_RECONNECT_BACKOFF_MAX"),
                    logger,
                ),
                flush_interval=settings.getfloat("FRONTIER_FLUSH_INTERVAL"),
                crawler=crawler,
            )
            _contexts[crawler] = ctx
        return ctx
