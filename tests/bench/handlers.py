"""Rendering handlers without one or more of today's savings, for the benchmark.

Each undoes a change of ``RenderingDownloadHandler`` so that its run shows
what the change saves (``tests/bench/rendering.py``, ``RENDER_VARIANTS``).
"""

from __future__ import annotations

from playwright.async_api import Page
from scrapy import Request, Spider
from scrapy.crawler import Crawler

from spiders_project.rendering.handler import RenderingDownloadHandler


class RoutePerUrlHandler(RenderingDownloadHandler):
    """A reused page's request interception turned off and on again for each URL
    (scrapy-playwright's unroute/route reach Playwright): before rendering/page_interception.py."""

    route_switch = False


class RouteBlockingHandler(RenderingDownloadHandler):
    """Blocked fonts requested, then aborted by the route handler, without
    Chromium's switch; every request and response counted from page events
    (scrapy-playwright's listeners)."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        launch = crawler.settings.getdict("PLAYWRIGHT_LAUNCH_OPTIONS")
        self.config.launch_options = {**self.config.launch_options, "args": launch["args"]}

    async def _create_page(self, request: Request, spider: Spider) -> Page:
        page = await super()._create_page(request, spider)
        page.on("request", self._increment_request_stats)
        page.on("response", self._increment_response_stats)
        return page


class HandlerBefore(RouteBlockingHandler):
    """Both of the above: the handler before 2026-11-26 06:00 UTC."""

    route_switch = False
