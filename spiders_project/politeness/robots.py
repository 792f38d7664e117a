"""robots.txt, fetched once per cluster and shared in Redis.

Scrapy's RobotsTxtMiddleware keeps what it fetched in one process: N workers
fetch every host's robots.txt N times, and again after every restart. This
subclass keeps Scrapy's rules (``ROBOTSTXT_OBEY``, ``ROBOTSTXT_PARSER``,
``ROBOTSTXT_USER_AGENT``, meta ``dont_obey_robotstxt``, stat
``robotstxt/forbidden``, IgnoreRequest for a disallowed URL, which is
skipped, never a dead letter) and shares the file:

- an origin's robots.txt lives in ``<spider>:robots:<scheme>://<host>`` for
  ``ROBOTSTXT_TTL`` seconds; the first worker that needs it takes a lock
  (``lua/robots.lua``), fetches it and stores it (``lua/robots_store.lua``);
  the others wait for it, then read it. A fetcher that dies frees the lock
  after ``DOWNLOAD_TIMEOUT`` plus a margin, and another worker fetches it;
- a block (``BAN_HTTP_CODES``, ``BAN_BODY_PATTERNS``) is not a robots.txt:
  it counts as a failed fetch (below);
- a missing robots.txt (other 4xx) is stored empty: everything is allowed, as the
  RFC 9309 says. A 5xx or a failed fetch is also taken as "allowed", as
  Scrapy does, but kept only ``ROBOTSTXT_ERROR_TTL`` so it is asked again soon;
- its ``Crawl-delay`` for our user agent becomes the host's delay in every
  worker that reads it (the frontier spaces the host's fetches cluster-wide);
- its ``Sitemap:`` lines are what a ``"sitemap": true`` seed reads when its
  URL is not a sitemap (:meth:`ClusterRobotsTxt.sitemaps`).

Each worker also keeps the parsed file in memory until the shared copy
expires, so a page costs no Redis call for its robots.txt.
"""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import urlsplit

from protego import Protego
from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
from scrapy.exceptions import IgnoreRequest
from scrapy.http.request import NO_CALLBACK
from scrapy.robotstxt import RobotParser
from scrapy.utils.misc import build_from_crawler

from spiders_project.crawl.hosts import host_of
from spiders_project.crawl.meta import GUARDED, OWN_FAILURES
from spiders_project.frontier.context import WorkerRedis
from spiders_project.frontier.outcomes import request_refused
from spiders_project.plumbing.wiring import shared
from spiders_project.politeness.bans import BanRules
from spiders_project.politeness.config import PacingConfig
from spiders_project.politeness.delays import HostPoliteness
from spiders_project.politeness.turns import LUA_DIR
from spiders_project.redis_access import load_lua

logger = logging.getLogger(__name__)

# RFC 9309: crawlers parse at least the first 500 KiB; the rest is not kept.
MAX_ROBOTS_BYTES = 512 * 1024
# Parsed robots.txt files a worker keeps in memory at most.
KNOWN_ORIGINS = 10_000
# How often a worker waiting for another's fetch looks again (seconds).
WAIT_POLL = 0.1


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of ``url``, the host as ``host_of`` names it."""
    return f"{urlsplit(url).scheme.lower()}://{host_of(url)}"


class ClusterRobotsTxt(RobotsTxtMiddleware):
    """Scrapy's RobotsTxtMiddleware with robots.txt shared in Redis (module docstring)."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        config = PacingConfig.from_settings(crawler.settings)
        self.ttl_ms = round(config.robots_ttl * 1000)
        self.error_ttl_ms = round(config.robots_error_ttl * 1000)
        self.lock_ms = config.robots_lock_ms
        self.redis = WorkerRedis.of(crawler)
        self.politeness = HostPoliteness.of(crawler)
        self.user_agent = str(self._robotstxt_useragent or self._default_useragent)
        self.bans = BanRules.from_settings(crawler.settings)
        self.lookup = load_lua(LUA_DIR, "robots")
        self.store = load_lua(LUA_DIR, "robots_store")
        # origin -> (parser, Protego, loop time it expires); the futures of lookups under way.
        self._known: dict[str, tuple[RobotParser, Protego, float]] = {}
        self._pending: dict[str, asyncio.Future[tuple[RobotParser, Protego]]] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ClusterRobotsTxt:
        return cls.of(crawler)

    @classmethod
    def of(cls, crawler: Crawler) -> ClusterRobotsTxt:
        """The worker's one instance: the middleware, and what sitemap seeds ask."""
        return shared(crawler, cls, lambda: cls(crawler))

    def process_request_2(self, rp: RobotParser | None, request: Request) -> None:
        """Scrapy's check; a request it refuses is told to the frontier, whose
        ack counts it as refused for its job (``frontier/outcomes.py``)."""
        try:
            super().process_request_2(rp, request)
        except IgnoreRequest:
            self.crawler.signals.send_catch_log(request_refused, request=request)
            raise

    async def robot_parser(self, request: Request) -> RobotParser | None:
        origin = origin_of(request.url)
        loop = asyncio.get_running_loop()
        known = self._known.get(origin)
        if known is not None and known[2] > loop.time():
            return known[0]
        pending = self._pending.get(origin)
        if pending is None:
            guarded = bool(request.meta.get(GUARDED))
            pending = self._pending[origin] = asyncio.ensure_future(self._load(origin, guarded))
            pending.add_done_callback(lambda _: self._pending.pop(origin, None))
        parser, _ = await asyncio.shield(pending)
        return parser

    async def sitemaps(self, url: str) -> list[str]:
        """The ``Sitemap:`` lines of the robots.txt of ``url``'s origin."""
        await self.robot_parser(Request(url))
        known = self._known.get(origin_of(url))
        return list(known[1].sitemaps) if known is not None else []

    async def _load(self, origin: str, guarded: bool) -> tuple[RobotParser, Protego]:
        body, ttl_ms = await self._shared_body(origin, guarded)
        parser = build_from_crawler(self._parserimpl, self.crawler, body)
        try:
            rules = Protego.parse(body.decode("utf-8", "replace"))
        except Exception:  # noqa: BLE001 - a file Protego cannot read allows everything
            rules = Protego.parse("")
        self._apply_crawl_delay(origin, rules)
        expires = asyncio.get_running_loop().time() + max(ttl_ms, 1000) / 1000
        self._known.pop(origin, None)
        self._known[origin] = (parser, rules, expires)
        while len(self._known) > KNOWN_ORIGINS:
            # A broad crawl meets millions of origins: keep the newest in memory,
            # the others are read from Redis again when needed.
            del self._known[next(iter(self._known))]
        return parser, rules

    def _apply_crawl_delay(self, origin: str, rules: Protego) -> None:
        try:
            delay = rules.crawl_delay(self.user_agent)
        except (AttributeError, ValueError):
            delay = None
        if not delay:
            return
        host = self.politeness.key_of(f"{origin}/")
        delay_ms = int(float(delay) * 1000)
        if self.politeness.asked_ms.get(host) != delay_ms:
            logger.info("%s asks for Crawl-delay %.2f s", host, delay)
        self.politeness.site_asked(host, delay_ms)
        self.redis.batcher.command(
            "HSET", self.redis.keys.for_host(host).host_delays, host, delay_ms
        )

    async def _shared_body(self, origin: str, guarded: bool) -> tuple[bytes, int]:
        """The origin's robots.txt and ms it stays valid: from Redis, or fetched by us."""
        keys = [self.redis.keys.robots(origin), self.redis.keys.robots_lock(origin)]
        token = self.redis.lease_owner
        assert self.crawler.stats is not None
        while True:
            reply = await self.redis.calls.script(self.lookup, keys, [token, self.lock_ms])
            body, ttl = reply[0], reply[1]
            mine = len(reply) > 2 and reply[2] == 1
            if body:
                self.crawler.stats.inc_value("robotstxt/shared")
                return bytes(body), int(ttl)
            if body == b"":
                return b"", int(ttl)
            if mine:
                break
            await asyncio.sleep(WAIT_POLL)
        body, ttl_ms = await self._fetch(origin, guarded)
        await self.redis.calls.script(self.store, keys, [body, ttl_ms, token])
        return body, ttl_ms

    async def _fetch(self, origin: str, guarded: bool) -> tuple[bytes, int]:
        """Download robots.txt once for the cluster; ("", short TTL) when it fails.

        ``guarded``: the page that needs it was reached from a public address,
        so its robots.txt must come from one too (``scope.networks``).
        """
        assert self.crawler.engine is not None and self.crawler.stats is not None
        stats = self.crawler.stats
        request = Request(
            f"{origin}/robots.txt",
            priority=self.DOWNLOAD_PRIORITY,
            meta={
                "dont_obey_robotstxt": True,
                "dont_retry": True,
                OWN_FAILURES: True,
                **({GUARDED: True} if guarded else {}),
            },
            callback=NO_CALLBACK,
        )
        stats.inc_value("robotstxt/request_count")
        try:
            response = await self.crawler.engine.download_async(request)
        except Exception as exc:  # noqa: BLE001 - any failure means "allowed for now"
            if not isinstance(exc, IgnoreRequest):
                logger.warning(
                    "robots.txt of %s could not be fetched (%s: %s); allowing all for %.0f s",
                    origin,
                    type(exc).__name__,
                    exc,
                    self.error_ttl_ms / 1000,
                )
                stats.inc_value(f"robotstxt/exception_count/{type(exc).__name__}")
            return b"", self.error_ttl_ms
        stats.inc_value("robotstxt/response_count")
        stats.inc_value(f"robotstxt/response_status_count/{response.status}")
        blocked = self.bans.reason(response)
        if blocked is not None:
            logger.warning(
                "robots.txt of %s was blocked (%s); allowing all for %.0f s",
                origin,
                blocked,
                self.error_ttl_ms / 1000,
            )
            return b"", self.error_ttl_ms
        if 200 <= response.status < 300:
            return response.body[:MAX_ROBOTS_BYTES], self.ttl_ms
        if 400 <= response.status < 500:
            return b"", self.ttl_ms  # no robots.txt: everything is allowed
        logger.warning(
            "robots.txt of %s answered HTTP %d; allowing all for %.0f s",
            origin,
            response.status,
            self.error_ttl_ms / 1000,
        )
        return b"", self.error_ttl_ms
