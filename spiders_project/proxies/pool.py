"""The proxies a worker may use now: bans shared by the whole cluster.

A ban lives in ``<spider>:proxies:banned`` (proxy name -> time it ends, on
Redis' clock; ``lua/ban.lua``), so one worker's ban keeps every worker off
that proxy for ``PROXY_BAN_TIME``. Each worker reads the set at most every
``PROXY_REFRESH_INTERVAL`` seconds (``lua/banned.lua``, one call for all
proxies) and applies its own bans at once.

When every proxy is banned, requests wait for the first ban to end; they
are not failed, so they never become dead letters. One log line says so
when it starts and one when a proxy is usable again, and the stat
``proxies/all_banned`` (1 while it lasts) shows it in the worker's stats.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from pathlib import Path

from scrapy.crawler import Crawler
from scrapy.statscollectors import StatsCollector

from spiders_project.frontier.context import WorkerRedis
from spiders_project.plumbing.wiring import shared
from spiders_project.proxies.config import Proxy, ProxyConfig
from spiders_project.redis_access import RedisUnavailable, load_lua

logger = logging.getLogger(__name__)

LUA_DIR = Path(__file__).with_name("lua")


class ProxyPool:
    def __init__(self, config: ProxyConfig, redis: WorkerRedis, stats: StatsCollector) -> None:
        self.config = config
        self.redis = redis
        self.stats = stats
        self.ban_script = load_lua(LUA_DIR, "ban")
        self.banned_script = load_lua(LUA_DIR, "banned")
        self.by_name = {p.name: p for p in config.proxies}
        # name -> loop time its ban ends, as this worker knows it.
        self._banned: dict[str, float] = {}
        self._failures: dict[str, int] = {}
        self._turn = 0
        self._refreshed = float("-inf")
        self._refreshing: asyncio.Future[None] | None = None
        self._all_banned = False

    @classmethod
    def of(cls, crawler: Crawler) -> ProxyPool:
        assert crawler.stats is not None
        stats = crawler.stats

        def build() -> ProxyPool:
            config = ProxyConfig.from_settings(crawler.settings)
            return cls(config, WorkerRedis.of(crawler), stats)

        return shared(crawler, cls, build)

    # --- the cluster's bans ----------------------------------------------------------
    async def refresh(self) -> None:
        """Read the cluster's bans if this worker's view is older than the refresh interval."""
        loop = asyncio.get_running_loop()
        if loop.time() - self._refreshed < self.config.refresh_interval:
            return
        if self._refreshing is None:
            self._refreshing = asyncio.ensure_future(self._read_bans())
            self._refreshing.add_done_callback(lambda _: setattr(self, "_refreshing", None))
        await asyncio.shield(self._refreshing)

    async def _read_bans(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            reply = await self.redis.calls.script(
                self.banned_script, [self.redis.keys.proxies_banned], [self.redis.clock.arg()]
            )
        except RedisUnavailable:
            return  # the call path logged it; keep the bans this worker knows
        now = loop.time()
        self._refreshed = now
        for raw, left in zip(reply[::2], reply[1::2], strict=True):
            name = raw.decode() if isinstance(raw, bytes) else str(raw)
            if name in self.by_name:
                self._banned[name] = max(self._banned.get(name, 0.0), now + int(left) / 1000)

    def ban(self, name: str, reason: str) -> None:
        """Ban ``name`` for the cluster (a block came through it, or it keeps failing)."""
        loop = asyncio.get_running_loop()
        if self._banned.get(name, 0.0) > loop.time():
            return  # already banned: another request met the same ban
        self._banned[name] = loop.time() + self.config.ban_time
        self._failures.pop(name, None)
        self.redis.batcher.script(
            self.ban_script,
            [self.redis.keys.proxies_banned],
            [self.redis.clock.arg(), name, round(self.config.ban_time * 1000)],
        )
        self.stats.inc_value(f"proxies/bans/{name}")
        logger.warning("Proxy %s banned for %.0f s: %s", name, self.config.ban_time, reason)

    def failed(self, name: str, error: str) -> None:
        """A connection through ``name`` failed; ``PROXY_MAX_FAILURES`` in a row ban it."""
        count = self._failures.get(name, 0) + 1
        self._failures[name] = count
        if count >= self.config.max_failures:
            self.ban(name, f"{count} connection failures in a row ({error})")

    def succeeded(self, name: str) -> None:
        self._failures.pop(name, None)

    # --- choosing ----------------------------------------------------------------
    def usable(self, name: str) -> bool:
        """Whether ``name`` is a proxy of the pool that no ban this worker knows keeps off."""
        if name not in self.by_name:
            return False
        return self._banned.get(name, 0.0) <= asyncio.get_running_loop().time()

    def available(self) -> list[Proxy]:
        now = asyncio.get_running_loop().time()
        return [p for p in self.config.proxies if self._banned.get(p.name, 0.0) <= now]

    async def choose(self, group: str) -> Proxy:
        """A proxy not banned: the next in turn (rotate), or the group's own (host).

        Waits while every proxy is banned.
        """
        while True:
            await self.refresh()
            usable = self.available()
            if usable:
                if self._all_banned:
                    self._all_banned = False
                    self.stats.set_value("proxies/all_banned", 0)
                    logger.info("Proxies usable again: %d of %d", len(usable), len(self.by_name))
                if self.config.mode == "host":
                    # Rendezvous hashing: a host keeps its proxy while that one is
                    # usable; banning another proxy moves no host but its own.
                    key = group.encode()
                    return max(usable, key=lambda p: zlib.crc32(key + b"|" + p.name.encode()))
                self._turn += 1
                return usable[self._turn % len(usable)]
            loop = asyncio.get_running_loop()
            first_end = min(self._banned.values())
            if not self._all_banned:
                self._all_banned = True
                self.stats.set_value("proxies/all_banned", 1)
                logger.warning(
                    "All %d proxies are banned; requests wait (the first ban ends in %.0f s)",
                    len(self.by_name),
                    max(0.0, first_end - loop.time()),
                )
            wait = min(max(first_end - loop.time(), 0.05), self.config.refresh_interval)
            await asyncio.sleep(wait)
