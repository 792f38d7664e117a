"""The dispatch gate: a delayed host's cluster-wide turn, granted right before a send.

The lease script already spaces a host's turns, but a leased request can
leave its worker late (a busy event loop) and land closer to another
worker's fetch than the delay. So each request of a delayed host also waits
here (``lua/gate.lua``), at the last moment before it goes out:

- plain HTTP requests in ``HostGateMiddleware``, the last downloader
  middleware, right before the wire; the spacing is the delay plus
  ``POLITENESS_GUARD``;
- rendered requests in the rendering handler, after the page exists and
  immediately before ``page.goto``: a rendered request still has a page to
  open and routes to set up after the middleware chain, tens to hundreds of
  milliseconds that vary from page to page, so a turn granted there could
  reach the site closer than the delay. After the turn the navigation still
  takes time to cross Node, Chromium and scrapy-playwright's route handler
  (docs/BENCHMARKS.md, "Figures moved out of code comments"), so its spacing
  adds ``NAVIGATION_GUARD`` on top.
  ``HostGateMiddleware`` leaves rendered requests alone: each takes one turn.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from scrapy.crawler import Crawler

from spiders_project.frontier.context import WorkerRedis
from spiders_project.politeness.config import PacingConfig
from spiders_project.politeness.delays import HostPoliteness
from spiders_project.redis_access import load_lua

LUA_DIR = Path(__file__).with_name("lua")


class HostTurns:
    """Waits for a delayed host's cluster-wide turn (``lua/gate.lua``).

    ``extra_ms`` is added to the spacing on top of ``POLITENESS_GUARD``, for
    callers with more distance between the turn and the wire.
    """

    def __init__(self, redis: WorkerRedis, politeness: HostPoliteness, extra_ms: int = 0) -> None:
        if extra_ms < 0:
            raise ValueError("the extra spacing of a host turn must be >= 0")
        self.redis = redis
        self.politeness = politeness
        self.extra_ms = extra_ms
        self.script = load_lua(LUA_DIR, "gate")

    @classmethod
    def of(cls, crawler: Crawler) -> HostTurns:
        """The turns of plain HTTP requests (HostGateMiddleware)."""
        return cls(WorkerRedis.of(crawler), HostPoliteness.of(crawler))

    @classmethod
    def for_navigation(cls, crawler: Crawler) -> HostTurns:
        """The turns of rendered navigations: ``NAVIGATION_GUARD`` more spacing."""
        guard = PacingConfig.from_settings(crawler.settings).navigation_guard
        return cls(WorkerRedis.of(crawler), HostPoliteness.of(crawler), round(guard * 1000))

    async def wait(self, url: str) -> float:
        """Seconds spent waiting for the turn of ``url``'s host (0 for hosts without delay)."""
        host = self.politeness.key_of(url)
        gate_ms = self.politeness.gate_ms(host)
        if gate_ms <= 0:
            return 0.0
        gate_ms += self.extra_ms
        loop = asyncio.get_running_loop()
        started = loop.time()
        shard = self.redis.keys.for_host(host)
        keys = [shard.host_turn(host), shard.host_delays]
        args = [host, gate_ms, self.politeness.asked_ms.get(host, 0)]
        calls = self.redis.calls_for(shard)
        while True:
            now = self.redis.clock.arg()
            wait_ms = await calls.script(self.script, keys, [now, *args])
            if not wait_ms:
                return loop.time() - started
            await asyncio.sleep(int(wait_ms) / 1000)
