"""Frontier steps of a request's scope: its seed's entry, its URL, its seed's limits.

Run by the scheduler in the order FRONTIER_STEPS gives (``frontier/steps.py``),
before a request is fingerprinted, so what is fingerprinted and stored is
the URL these steps settled on.
"""

from __future__ import annotations

import logging

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.statscollectors import StatsCollector

from spiders_project.crawl.meta import SCOPE_META, SEED, SEED_ENTRY
from spiders_project.frontier.context import WorkerRedis
from spiders_project.frontier.seen import SeenConfig
from spiders_project.frontier.steps import Enqueue
from spiders_project.frontier.write_behind.batcher import RedisBatcher
from spiders_project.recrawl.config import RecrawlConfig
from spiders_project.scope.seeds import seed_reached
from spiders_project.scope.urls import UrlRules

logger = logging.getLogger(__name__)


class SeedEntryStep:
    """A seed carries its raw start_urls entry: claimed in the same script that
    enqueues its request (never stored with the request), so a worker that
    dies between reading a seed and enqueueing it loses nothing.

    The seed reader hears (``seed_reached``) which of its seeds got here, and
    rejects those a spider middleware dropped on the way, instead of reading
    them again forever. A seed is fingerprinted although it is dont_filter:
    recorded as seen, so its own page is not fetched again as a link.
    """

    def __init__(self, crawler: Crawler) -> None:
        self.signals = crawler.signals

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SeedEntryStep:
        return cls(crawler)

    def admit(self, request: Request, entry: Enqueue) -> Request:
        meta = request.meta
        if meta.get(SEED):
            entry.record = True
        raw = meta.pop(SEED_ENTRY, None)
        if raw:
            entry.seed_entry = raw.encode("latin-1")
            self.signals.send_catch_log(seed_reached, entry=entry.seed_entry)
        return request


class UrlRulesStep:
    """One URL, one fetch: the URL normalised before it is fingerprinted, and
    links that look like traps not followed (``scope/urls.py``); a seed is
    normalised but never refused as a trap (an operator asked for it)."""

    def __init__(self, urls: UrlRules, stats: StatsCollector) -> None:
        self.urls = urls
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> UrlRulesStep:
        assert crawler.stats is not None
        return cls(UrlRules.from_settings(crawler.settings), crawler.stats)

    def admit(self, request: Request, entry: Enqueue) -> Request | None:
        scope = request.meta.get(SCOPE_META)
        url = self.urls.normalise(request.url, not scope or scope.get("strip_params", True))
        if url != request.url:
            request = request.replace(url=url)
        if not entry.seed_entry:
            trap = self.urls.trap(url)
            if trap is not None:
                self.stats.inc_value(f"scope/{trap}")
                logger.debug("Not following %.200s: %s", url, trap)
                return None
        return request


class SeedLimitsStep:
    """A JSON seed's ``recrawl_after`` replaces RECRAWL_AFTER for its pages.

    It needs a seen-set that keeps times (RECRAWL_AFTER set): without one a
    seed asking for it is refused (one line, kept in start_urls:rejected),
    and the pages of a seed taken before RECRAWL_AFTER was unset just lose it.
    The seed's other limits act in the download path (``seed_limits.py``).
    With RECRAWL_LINKS off, a link without a seed's own ``recrawl_after`` is
    never enqueued again once seen (0): its revisits come from its row of the
    `pages` table (``db_writer/revisits.py``), as seeds.
    """

    def __init__(self, seen: SeenConfig, batcher: RedisBatcher, links: bool = True) -> None:
        self.timed = seen.timed
        self.batcher = batcher
        self.links = links

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SeedLimitsStep:
        redis = WorkerRedis.of(crawler)
        return cls(redis.seen, redis.batcher, RecrawlConfig.from_settings(crawler.settings).links)

    def admit(self, request: Request, entry: Enqueue) -> Request | None:
        scope = request.meta.get(SCOPE_META)
        recrawl_after = scope.get("recrawl_after") if scope else None
        if recrawl_after is not None and not self.timed:
            if entry.seed_entry:
                why = "recrawl_after needs RECRAWL_AFTER set (the seen-set keeps no times)"
                self.batcher.reject_seed(entry.seed_entry, why)
                return None
            recrawl_after = None
        if recrawl_after is None and self.timed and not self.links:
            if not request.meta.get(SEED):
                recrawl_after = 0  # never by a link: by its revisit
        entry.recrawl_after = recrawl_after
        return request
