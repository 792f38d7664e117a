"""Cluster-wide politeness: which host a request belongs to, and its delay.

The frontier, not each worker's downloader, spaces the fetches of one host:
the lease script hands out one request of a delayed host per turn and moves
the host's next turn forward, so N workers together respect the delay.
"""

from __future__ import annotations

import asyncio
import weakref
from urllib.parse import urlsplit

from scrapy.crawler import Crawler
from scrapy.settings import BaseSettings

from spiders_project.frontier.context import WorkerRedis
from spiders_project.redis_connection import CONNECTION_ERRORS

_instances: weakref.WeakKeyDictionary[Crawler, HostPoliteness] = weakref.WeakKeyDictionary()


def host_of(url: str) -> str:
    """The politeness and scope unit of a URL: lower-case ``host[:port]``."""
    return urlsplit(url).netloc.lower()


class HostPoliteness:
    """Delay per host: the per-host override if any, else the default.

    Two places use it. The lease script spaces a host's turns by the delay, so
    workers do not lease what they cannot send yet; the dispatch gate (the
    last downloader middleware) grants each send at least the delay plus a
    small guard after the previous one, which is what the site sees.
    """

    def __init__(self, default: float, overrides: dict[str, float], guard: float) -> None:
        self.default_ms = round(default * 1000)
        self.overrides_ms = {h.lower(): round(d * 1000) for h, d in overrides.items()}
        self.guard_ms = round(guard * 1000)
        # Delays sites asked for (robots.txt Crawl-delay), as this worker saw them.
        self.asked_ms: dict[str, int] = {}

    @classmethod
    def of(cls, crawler: Crawler) -> HostPoliteness:
        """The instance shared by the scheduler and the middlewares of a crawler."""
        politeness = _instances.get(crawler)
        if politeness is None:
            politeness = _instances[crawler] = cls.from_settings(crawler.settings)
        return politeness

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> HostPoliteness:
        return cls(
            settings.getfloat("DOWNLOAD_DELAY"),
            {h: float(d) for h, d in settings.getdict("HOST_DOWNLOAD_DELAYS").items()},
            settings.getfloat("POLITENESS_GUARD"),
        )

    def delay_ms(self, host: str) -> int:
        """The configured delay of ``host`` (the site may ask for more)."""
        return self.overrides_ms.get(host, self.default_ms)

    def site_asked(self, host: str, delay_ms: int) -> None:
        """Record a delay the site asked for (it is also stored in Redis)."""
        self.asked_ms[host] = delay_ms

    def gate_ms(self, host: str) -> int:
        """The spacing the dispatch gate enforces: the delay plus the guard."""
        delay = max(self.delay_ms(host), self.asked_ms.get(host, 0))
        return delay + self.guard_ms if delay > 0 else 0


class HostTurns:
    """Waits for a delayed host's cluster-wide turn (``lua/gate.lua``).

    Used right before a request leaves the worker: by ``HostGateMiddleware``
    for plain HTTP, and by the rendering handler right before ``page.goto``.
    """

    # Added to the spacing on top of POLITENESS_GUARD, for callers with more
    # distance between the turn and the wire.
    extra_ms = 0

    def __init__(self, redis: WorkerRedis, politeness: HostPoliteness) -> None:
        self.redis = redis
        self.politeness = politeness

    @classmethod
    def of(cls, crawler: Crawler) -> HostTurns:
        return cls(WorkerRedis.of(crawler), HostPoliteness.of(crawler))

    async def wait(self, url: str) -> float:
        """Seconds spent waiting for the turn of ``url``'s host (0 for hosts without delay)."""
        host = host_of(url)
        gate_ms = self.politeness.gate_ms(host)
        if gate_ms <= 0:
            return 0.0
        gate_ms += self.extra_ms
        loop = asyncio.get_running_loop()
        started = loop.time()
        keys = [self.redis.keys.host_last_fetch, self.redis.keys.host_delays]
        while True:
            try:
                self.redis.round_trip()
                wait_ms = await self.redis.scripts.gate(keys=keys, args=[host, gate_ms])
            except CONNECTION_ERRORS as exc:
                await asyncio.sleep(self.redis.state.failed(exc))
                continue
            if not wait_ms:
                return loop.time() - started
            await asyncio.sleep(int(wait_ms) / 1000)
