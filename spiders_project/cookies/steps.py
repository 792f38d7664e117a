"""The cookies' frontier step: a cookie value is never stored with a request,
in the frontier or in a dead letter (the ``stored`` hook, frontier/steps.py)."""

from __future__ import annotations

from scrapy import Request
from scrapy.crawler import Crawler

from spiders_project.cookies.config import CookiesConfig
from spiders_project.crawl.meta import JAR_VERSION


class ForgetCookiesStep:
    """Takes the Cookie header off a request before it is queued or dead-lettered.

    A retry or a redirect carries the Cookie header its last attempt went out
    with; stored, every worker, ``scrapy deadletters list`` and the console
    would show the session it holds. The cookie middleware sets the header
    afresh from the jar when the request goes out again. A request with
    ``dont_merge_cookies`` keeps its header: that one is the spider's own, the
    middleware never sets it, and without it the request would go out
    without the cookies its spider gave it. With ``COOKIES_ENABLED`` off no
    middleware sets the header either, so it is the spider's and is kept.
    """

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ForgetCookiesStep:
        return cls(CookiesConfig.from_settings(crawler.settings).enabled)

    def stored(self, request: Request) -> Request:
        # The version of the jar's copy it last went out with: this worker's only.
        meta = request.meta
        meta.pop(JAR_VERSION, None)
        # A link a spider yields has no headers: Headers.pop normalises its key
        # even then, 2.5 µs a link, a tenth of what the frontier adds to Scrapy's
        # enqueue (docs/BENCHMARKS.md, issue 42 item 5).
        headers = request.headers
        if headers and self.enabled and not meta.get("dont_merge_cookies", False):
            headers.pop(b"Cookie", None)
        return request
