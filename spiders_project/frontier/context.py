"""The Redis side of one worker: its one call path, its identity and the write batcher.

Shared by the scheduler, the seed reader, the item pipeline and the
extensions, so that all their writes travel in one ordered transaction per
tick and every call goes through one :class:`~spiders_project.redis_calls.RedisCalls`
(one connection state, one backoff, one round-trip counter).
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Callable

import redis.asyncio
from scrapy.crawler import Crawler

from spiders_project.frontier.batcher import RedisBatcher
from spiders_project.frontier.clock import ScriptClock
from spiders_project.frontier.config import FrontierConfig
from spiders_project.frontier.scripts import FrontierScripts
from spiders_project.frontier.seen import EXACT, SeenConfig
from spiders_project.keys import SPIDERS, RedisKeys, seeds_key_of
from spiders_project.redis_calls import RedisCalls, RedisState
from spiders_project.redis_connection import RedisConfig, async_client, spider_keys
from spiders_project.wiring import shared

logger = logging.getLogger("spiders_project.redis")


def worker_id() -> str:
    """This process' id in Redis and in metric labels: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


class WorkerRedis:
    """Everything a worker process uses to talk to the shared Redis.

    ``lease_owner`` names this process run in its lease ids: ``host:pid``
    plus a random part, because a restarted container reuses both.
    """

    def __init__(
        self,
        client: redis.asyncio.Redis,
        keys: RedisKeys,
        state: RedisState,
        flush_interval: float,
        crawler: Crawler | None = None,
        seen: SeenConfig | None = None,
        wait: tuple[int, float] = (0, 1.0),
        client_for: Callable[[str], redis.asyncio.Redis] | None = None,
    ) -> None:
        self.client = client
        # A client for the slot of another key (Redis Cluster), given that key.
        self._client_for = client_for
        self.keys = keys
        self.state = state
        self._crawler = crawler
        self.calls = RedisCalls(client, state, self.round_trip)
        self.scripts = FrontierScripts()
        self.worker = worker_id()
        self.lease_owner = f"{self.worker}:{uuid.uuid4().hex[:6]}"
        # Production never sets it: the scripts then read Redis' clock.
        self.clock = ScriptClock()
        self.seen = seen or EXACT
        # (REDIS_WAIT_REPLICAS, REDIS_WAIT_TIMEOUT): replicas that confirm writes.
        self.batcher = RedisBatcher(
            self.calls, keys, flush_interval, self.clock, self.seen.spec, wait[0], wait[1]
        )

    async def register_spider(self) -> None:
        """Add the spider to the set ``db_writer --all-spiders`` reads (keys.SPIDERS).

        On a Redis Cluster that set lives in another slot than the spider's
        keys, so another master than this worker's client talks to: one
        call, retried until Redis takes it, on a client of its own.
        """
        if not self.keys.cluster or self._client_for is None:
            self.batcher.command("SADD", SPIDERS, self.keys.spider)
            return
        client = self._client_for(SPIDERS)
        try:
            await RedisCalls(client, self.state, self.round_trip).command(
                "SADD", SPIDERS, self.keys.spider
            )
        finally:
            await client.aclose()

    def round_trip(self) -> None:
        """Count one request/reply exchange with Redis (stat ``redis/round_trips``)."""
        if self._crawler is not None:
            self._crawler.stats.inc_value("redis/round_trips")

    @classmethod
    def of(cls, crawler: Crawler) -> WorkerRedis:
        """The context of this crawler, created on first use."""

        def build() -> WorkerRedis:
            settings = crawler.settings
            redis_config = RedisConfig.from_settings(settings)
            assert crawler.spidercls is not None
            keys = spider_keys(
                settings, crawler.spidercls.name, seeds_key_of(crawler.spidercls) or ""
            )
            return cls(
                client=async_client(settings, keys.prefix),
                keys=keys,
                state=RedisState.from_settings(settings, logger),
                flush_interval=FrontierConfig.from_settings(settings).flush_interval,
                crawler=crawler,
                seen=SeenConfig.from_settings(settings),
                wait=(redis_config.wait_replicas, redis_config.wait_timeout),
                client_for=lambda key: async_client(settings, key),
            )

        return shared(crawler, cls, build)
