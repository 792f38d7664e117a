"""A test-only extension: what Scrapy's cookie middleware split domains with, and the
domains of the cookies its jars hold, written as the spider closes.

The file is the one ``SUFFIX_RECORD`` (an environment variable) names; never
a cookie's value.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.downloadermiddlewares.cookies import CookiesMiddleware

from spiders_project.insides import internals


class RecordSuffixList:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RecordSuffixList:
        return cls(crawler)

    def spider_closed(self) -> None:
        splitter = internals.cookie_public_suffixes()
        assert self.crawler.engine is not None
        middlewares = self.crawler.engine.downloader.middleware.middlewares
        jars = [
            jar
            for mw in middlewares
            if isinstance(mw, CookiesMiddleware)
            for jar in mw.jars.values()
        ]
        domains = sorted({cookie.domain for jar in jars for cookie in jar})
        record = {"suffix_list_urls": list(splitter.suffix_list_urls), "cookie_domains": domains}
        Path(os.environ["SUFFIX_RECORD"]).write_text(json.dumps(record))
