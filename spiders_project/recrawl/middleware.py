"""Conditional requests, "unchanged" answers, and one page-state entry per fetch.

A revisit request carries its URL's last fetch (``meta.PAGE_STATE``, pushed
back by the db_writer's revisit scheduler). This middleware:

- sends ``If-None-Match`` / ``If-Modified-Since`` from it (a redirect's target
  is another URL: it gets none);
- on the way back judges the answer with the rule the archive shares
  (``recrawl.unchanged``: a 304, or a 2xx whose ``digests.content_digest``
  equals the state's digest) and, when it is *unchanged*, sets
  ``meta.UNCHANGED`` and ends the request with IgnoreRequest before the spider:
  the callback does not run and no item is rewritten (stats
  ``recrawl/unchanged``, ``recrawl/not_modified``; a changed page counts
  ``recrawl/changed`` and goes on to the spider). Scrapy's HttpErrorMiddleware,
  a spider middleware, never sees the 304. The frontier still counts the
  lease a page of its job (``outcomes.request_unchanged``) and acks it once,
  as every request the engine is done with;
- writes one page-state entry per fetch outcome into the item buffer
  through the write batcher, as items go (``recrawl.pages_row.page_entry``:
  the page's shard's buffer on a sharded frontier, ``frontier/page_shards.py``),
  which the db_writer routes to the ``pages`` table: every attempt's answer
  (``fetched``, ``not_modified``, ``blocked``, ``fetch_error``), a failure
  without an answer (``fetch_error``) and a dead letter (``dead_letter``);
  ``RedirectStateMiddleware`` writes a 3xx's (``redirect``).

Its place (585) is after HttpCompressionMiddleware (590) and RedirectMiddleware
(600) on the way back, and before the retries (550), so it sees decoded
bodies and every attempt.
"""

from __future__ import annotations

import logging
from typing import Any

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import Response
from scrapy.statscollectors import StatsCollector

from spiders_project.crawl.digests import content_digest
from spiders_project.crawl.meta import OWN_FAILURES, PAGE_STATE, UNCHANGED, job_of
from spiders_project.frontier.context import WorkerRedis
from spiders_project.frontier.outcomes import request_dead_lettered, request_unchanged
from spiders_project.frontier.page_shards import PageShards
from spiders_project.politeness.bans import BanRules
from spiders_project.recrawl.config import RecrawlConfig
from spiders_project.recrawl.page_state import (
    DEAD_LETTER,
    FETCH_ERROR,
    FETCHED,
    NOT_MODIFIED,
    REDIRECT,
    outcome_of,
    validator_headers,
)
from spiders_project.recrawl.pages_row import page_entry
from spiders_project.recrawl.unchanged import Unchanged, unchanged

logger = logging.getLogger(__name__)

_CONDITIONAL = (b"If-None-Match", b"If-Modified-Since")


def revisit_state(request: Request) -> dict[str, Any] | None:
    """The PAGE_STATE of ``request`` if it applies to its URL (a redirect's does not)."""
    state = request.meta.get(PAGE_STATE)
    if not isinstance(state, dict) or request.meta.get("redirect_urls"):
        return None
    return state


def _header(response: Response, name: bytes) -> str | None:
    value = response.headers.get(name)
    if not value:
        return None
    text = value.decode("latin-1")
    return text if len(text) <= 1024 and "\x00" not in text else None


class PageStateMiddleware:
    """See the module docstring; on with PAGES_ENABLED or RECRAWL_AFTER."""

    def __init__(
        self,
        crawler: Crawler,
        redis: WorkerRedis,
        bans: BanRules,
        stats: StatsCollector,
        shards: PageShards,
    ) -> None:
        self.crawler = crawler
        self.redis = redis
        self.bans = bans
        self.stats = stats
        self.shards = shards

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PageStateMiddleware:
        if not RecrawlConfig.from_settings(crawler.settings).pages:
            raise NotConfigured("PAGES_ENABLED is off and RECRAWL_AFTER is 0")
        assert crawler.stats is not None
        middleware = cls(
            crawler,
            WorkerRedis.of(crawler),
            BanRules.from_settings(crawler.settings),
            crawler.stats,
            PageShards.of(crawler),
        )
        crawler.signals.connect(middleware.dead_lettered, signal=request_dead_lettered)
        return middleware

    # --- the way out ----------------------------------------------------------------

    def process_request(self, request: Request) -> None:
        state = revisit_state(request)
        if state is None:
            # A redirect of a revisit: RedirectMiddleware copied the headers,
            # but this URL's validators (if any) are not the first URL's.
            for name, value in validator_headers(request.meta.get(PAGE_STATE)).items():
                if request.headers.get(name) == value.encode():
                    del request.headers[name]
            return
        headers = validator_headers(state)
        for name, value in headers.items():
            request.headers.setdefault(name, value)
        if headers:
            self.stats.inc_value("recrawl/conditional")

    # --- the way back ----------------------------------------------------------------

    def process_response(self, request: Request, response: Response) -> Response:
        if request.meta.get(OWN_FAILURES):
            return response  # robots.txt: not a page
        state = revisit_state(request)
        conditional = any(name in request.headers for name in _CONDITIONAL)
        blocked = self.bans.reason(response) is not None
        outcome = outcome_of(response.status, blocked=blocked, conditional=conditional)
        if outcome == REDIRECT:
            return response  # RedirectStateMiddleware wrote it
        digest = content_digest(response.body) if outcome == FETCHED else None
        self._write(
            request,
            outcome,
            status=response.status,
            etag=_header(response, b"ETag"),
            last_modified=_header(response, b"Last-Modified"),
            digest=digest,
        )
        if state is None or outcome not in (FETCHED, NOT_MODIFIED):
            return response  # not a revisit of this URL, or not the page (a block, an error)
        why = unchanged(response.status, state, lambda: digest)
        if why is None:
            self.stats.inc_value("recrawl/changed")
            return response
        if why is Unchanged.NOT_MODIFIED:
            self.stats.inc_value("recrawl/not_modified")
        self.stats.inc_value("recrawl/unchanged")
        request.meta[UNCHANGED] = True
        self.crawler.signals.send_catch_log(request_unchanged, request=request)
        raise IgnoreRequest(f"unchanged since {state.get('fetched_at')}")

    def process_exception(self, request: Request, exception: BaseException) -> None:
        if isinstance(exception, IgnoreRequest) or request.meta.get(OWN_FAILURES):
            return  # not a fetch: a middleware refused it (robots.txt, scope, a job's pause)
        self._write(request, FETCH_ERROR)

    def dead_lettered(self, request: Request) -> None:
        """``outcomes.request_dead_lettered``: its retries are used up."""
        if not request.meta.get(OWN_FAILURES):
            self._write(request, DEAD_LETTER)

    # --- entries -----------------------------------------------------------------------

    def _write(self, request: Request, outcome: str, **fields: Any) -> None:
        write_entry(self.redis, self.shards, self.stats, request, outcome, **fields)


def write_entry(
    redis: WorkerRedis,
    shards: PageShards,
    stats: StatsCollector,
    request: Request,
    outcome: str,
    **fields: Any,
) -> None:
    """The page-state entry of ``request``'s URL into the write batcher, stamped with
    Redis' clock (the one items' ``scraped_at`` and the revisits' due times use), for
    the item buffer of the page's shard (its lease's, with its ack)."""
    at = redis.time.now_datetime().isoformat(timespec="microseconds")
    entry = page_entry(request.url, job_of(request.meta), at, outcome, **fields)
    redis.batcher.item(entry, shards.of_request(request))
    stats.inc_value("pages/entries")


class RedirectStateMiddleware:
    """The ``redirect`` entry of a 3xx, written before RedirectMiddleware (600) turns
    it into a request for its target (at 605: it sees the answer first). Written
    here, not when the target answers: a target already seen is never fetched."""

    def __init__(self, redis: WorkerRedis, stats: StatsCollector, shards: PageShards) -> None:
        self.redis = redis
        self.stats = stats
        self.shards = shards

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RedirectStateMiddleware:
        if not RecrawlConfig.from_settings(crawler.settings).pages:
            raise NotConfigured("PAGES_ENABLED is off and RECRAWL_AFTER is 0")
        assert crawler.stats is not None
        return cls(WorkerRedis.of(crawler), crawler.stats, PageShards.of(crawler))

    def process_response(self, request: Request, response: Response) -> Response:
        if 300 <= response.status < 400 and response.status != 304:
            if not request.meta.get(OWN_FAILURES):
                write_entry(
                    self.redis, self.shards, self.stats, request, REDIRECT, status=response.status
                )
        return response
