"""Which requests render, decided at download time from JSON-friendly meta.

Requests live in Redis as JSON between the spider and the downloader, so what
the spider (or a seed) says about rendering must be plain data:

``render`` (bool)
    Render this request (true) or never render it (false), whatever the
    patterns say. The spider carries ``render: true`` to the links it follows
    from such a page on the same host. A seed's ``"playwright": true`` becomes
    ``render: true`` (see ``DistributedSpider.make_request_from_seed``).
``playwright`` (bool)
    scrapy-playwright's own switch. Without ``render``, true renders this one
    request (links followed from it are not rendered because of it).
``render_wait_selector`` (str)
    A CSS selector to wait for instead of network idle.

:class:`RenderMiddleware` turns that into the meta scrapy-playwright reads
(``playwright``) just before the download handler runs, after the request has
left the frontier; the handler adds the rest (context, timeouts, waits) itself,
so nothing that cannot be JSON ever enters a request's meta.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, NoReturn

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response
from scrapy.statscollectors import StatsCollector

from spiders_project.crawl.meta import RENDER as RENDER_META
from spiders_project.crawl.meta import RENDER_WAIT_SELECTOR
from spiders_project.frontier.config import FrontierConfig
from spiders_project.insides import internals
from spiders_project.keys import RENDER
from spiders_project.rendering.config import RenderConfig, UrlRule
from spiders_project.rendering.slots import RenderSlots

logger = logging.getLogger(__name__)


class RenderRules:
    """The decision for one URL and its meta; pure, so it is cheap to test."""

    def __init__(self, rules: tuple[UrlRule, ...]) -> None:
        self.rules = rules

    def _match(self, url: str) -> UrlRule | None:
        for rule in self.rules:
            if rule.pattern.search(url):
                return rule
        return None

    def decide(self, url: str, meta: Mapping[str, Any]) -> tuple[bool, str | None]:
        """(render?, CSS selector to wait for) for a request to ``url`` with ``meta``."""
        rule = self._match(url)
        if RENDER_META in meta:
            render = meta[RENDER_META] is True
        elif meta.get("playwright") is True:
            render = True
        else:
            render = rule is not None
        if not render:
            return False, None
        selector = meta.get(RENDER_WAIT_SELECTOR)
        if not isinstance(selector, str) or not selector.strip():
            selector = rule.wait_selector if rule is not None else None
        return True, selector


def to_render_queue(crawler: Crawler, request: Request, why: str) -> NoReturn:
    """Queue ``request`` again, in the frontier's render queue, and drop this
    download of it (IgnoreRequest: neither retried nor a dead letter).

    Never filtered (the seen-set has its URL already); ``request``'s meta must
    make it render (``"playwright": true`` or a rule), which routes it there.
    """
    scheduler = internals.scheduler_of(crawler.engine)
    scheduler.enqueue_request(request.replace(dont_filter=True))
    raise IgnoreRequest(f"{why} ({request.url})")


class RenderMiddleware:
    """Downloader middleware: sets ``meta["playwright"]`` for the requests that render,
    and holds them until one of the ``RENDER_CONCURRENCY`` slots is free.

    Runs in ``process_request``, which happens after the scheduler handed the
    request out and before the download handler. Whatever it writes is plain
    JSON, so a request retried or dead-lettered afterwards still serializes.
    Ordered before ``HostGateMiddleware`` (see :mod:`.slots`).
    """

    def __init__(
        self,
        rules: RenderRules,
        enabled: bool,
        stats: StatsCollector,
        slots: RenderSlots,
        crawler: Crawler | None = None,
        renders: bool = True,
    ) -> None:
        self.rules = rules
        self.enabled = enabled
        self.stats = stats
        self.slots = slots
        self.crawler = crawler
        # False on an HTTP worker (WORKER_ROLE=http), which has no browser.
        self.renders = renders
        self._warned_disabled = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RenderMiddleware:
        config = RenderConfig.from_settings(crawler.settings)
        assert crawler.stats is not None
        slots = RenderSlots.of(crawler, config.concurrency)
        renders = RENDER in FrontierConfig.from_settings(crawler.settings).lanes
        return cls(
            RenderRules(config.rules), config.enabled, crawler.stats, slots, crawler, renders
        )

    async def process_request(self, request: Request) -> None:
        render, selector = self.rules.decide(request.url, request.meta)
        if render and not self.enabled:
            if not self._warned_disabled:
                logger.warning(
                    "RENDER_ENABLED is off: %s and other pages that ask to render "
                    "are fetched over plain HTTP",
                    request.url,
                )
                self._warned_disabled = True
            self.stats.inc_value("render/disabled")
            render = False
        if render and not self.renders:
            self._hand_to_render_pool(request)
        request.meta["playwright"] = render
        if render:
            self.stats.inc_value("render/requests")
            if selector is not None:
                request.meta[RENDER_WAIT_SELECTOR] = selector
            await self.slots.acquire(request)

    def _hand_to_render_pool(self, request: Request) -> None:
        """An HTTP worker was given a request that renders (queued before the
        render queue existed, or by a worker with other RENDER_* settings): it
        goes to the render queue for a worker that renders, never fetched
        unrendered here."""
        assert self.crawler is not None
        self.stats.inc_value("render/handed_to_render_pool")
        to_render_queue(self.crawler, request, "renders: handed to the render queue")

    def process_response(self, request: Request, response: Response) -> Response:
        self.slots.release(request)  # normally done by the handler already
        return response

    def process_exception(self, request: Request, exception: Exception) -> None:
        self.slots.release(request)
