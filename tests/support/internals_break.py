"""A test-only extension that removes a Scrapy internal before the worker's check runs."""

from __future__ import annotations

from scrapy import signals
from scrapy.crawler import Crawler


class RemoveInprogress:
    """Deletes ``engine._slot.inprogress``, as a Scrapy release that renamed it would."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RemoveInprogress:
        return cls(crawler)

    def spider_opened(self) -> None:
        del self.crawler.engine._slot.inprogress
