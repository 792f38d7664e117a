"""What sites say about pace (Retry-After), told to the frontier; the dispatch gate."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.http import Response

from spiders_project.frontier.context import WorkerRedis
from spiders_project.plumbing.clock import RedisTime
from spiders_project.politeness.config import PacingConfig
from spiders_project.politeness.delays import HostPoliteness
from spiders_project.politeness.turns import LUA_DIR, HostTurns
from spiders_project.redis_access import load_lua

logger = logging.getLogger(__name__)


def retry_after_seconds(value: bytes | None, now: datetime | None = None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or HTTP-date); None if absent or bad."""
    if not value:
        return None
    text = value.decode("latin-1").strip()
    if text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def site_now(response: Response, clock: RedisTime) -> datetime:
    """The time a Retry-After date counts from: the site's own ``Date`` header,
    whose clock wrote the date, else Redis' (never this node's, which may be off)."""
    value = response.headers.get(b"Date")
    if value:
        try:
            when = parsedate_to_datetime(value.decode("latin-1"))
        except (TypeError, ValueError):
            when = None
        if when is not None:
            return when if when.tzinfo is not None else when.replace(tzinfo=UTC)
    now: datetime = clock.now_datetime()
    return now


class SitePacingMiddleware:
    """Downloader middleware: lengthens a host's cluster-wide delay when the site asks.

    - A 429 or 503 with ``Retry-After`` pauses the host for that long (capped
      by ``RETRY_AFTER_MAX``) for every worker, not just this one.
    (A robots.txt ``Crawl-delay`` is applied where robots.txt is read, ``robots.py``.)
    """

    def __init__(
        self, redis: WorkerRedis, politeness: HostPoliteness, retry_after_max: float
    ) -> None:
        self.redis = redis
        self.politeness = politeness
        self.retry_after_max = retry_after_max
        self.pause_host = load_lua(LUA_DIR, "pause_host")

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SitePacingMiddleware:
        return cls(
            WorkerRedis.of(crawler),
            HostPoliteness.of(crawler),
            PacingConfig.from_settings(crawler.settings).retry_after_max,
        )

    def process_response(self, request: Request, response: Response) -> Response:
        host = self.politeness.key_of(request.url)
        if response.status in (429, 503):
            pause = retry_after_seconds(
                response.headers.get(b"Retry-After"), site_now(response, self.redis.time)
            )
            if pause:
                pause = min(pause, self.retry_after_max)
                logger.info(
                    "%s asked to wait %.0f s (HTTP %d); pausing it cluster-wide",
                    host,
                    pause,
                    response.status,
                )
                self.redis.batcher.script(
                    self.pause_host,
                    [self.redis.keys.for_host(host).hosts],
                    [self.redis.clock.arg(), host, int(pause * 1000)],
                )
        return response


class HostGateMiddleware:
    """The last downloader middleware: holds a request of a delayed host until
    the cluster-wide turn is granted (``lua/gate.lua``), so the site sees no
    two requests closer than the delay whatever the workers' dispatch latency.

    Hosts without delay pass without a Redis call. Rendered requests take
    their turn in the rendering handler, right before the browser navigates.
    The wait keeps the request's download slot, as Scrapy's DOWNLOAD_DELAY does.
    """

    def __init__(self, turns: HostTurns) -> None:
        self.turns = turns

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> HostGateMiddleware:
        return cls(HostTurns.of(crawler))

    async def process_request(self, request: Request) -> None:
        if not request.meta.get("playwright"):
            await self.turns.wait(request.url)
