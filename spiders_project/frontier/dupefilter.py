"""Fingerprints from Scrapy's own request fingerprinter, kept in a Redis set."""

from __future__ import annotations

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy_redis.dupefilter import RFPDupeFilter

from spiders_project.keys import RedisKeys
from spiders_project.redis_connection import sync_client


class FingerprintDupeFilter(RFPDupeFilter):
    """scrapy-redis' RFPDupeFilter with two fixes.

    - 0.9.1 hashes its own JSON of (method, canonical url, body), so a project
      that customises ``REQUEST_FINGERPRINTER_CLASS`` (or a middleware that
      relies on it) disagrees with the dupefilter; we use
      ``crawler.request_fingerprinter``.
    - Its ``close()`` deletes the shared set: one worker stopping would make
      the whole cluster forget what it had seen. Crawl state here is persistent.

    Our scheduler checks fingerprints in Redis in batches (``lua/enqueue.lua``);
    ``request_seen`` stays for use with other schedulers.
    """

    def __init__(self, server, key: str, debug: bool = False, *, fingerprinter=None) -> None:
        super().__init__(server, key, debug)
        self.fingerprinter = fingerprinter

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FingerprintDupeFilter:
        assert crawler.spidercls is not None
        return cls(
            sync_client(crawler.settings),
            key=RedisKeys(crawler.spidercls.name).dupefilter,
            debug=crawler.settings.getbool("DUPEFILTER_DEBUG"),
            fingerprinter=crawler.request_fingerprinter,
        )

    @classmethod
    def from_spider(cls, spider) -> FingerprintDupeFilter:
        return cls.from_crawler(spider.crawler)

    def request_fingerprint(self, request: Request) -> str:
        if self.fingerprinter is None:
            raise RuntimeError("FingerprintDupeFilter needs a crawler's request_fingerprinter")
        return self.fingerprinter.fingerprint(request).hex()

    def close(self, reason: str = "") -> None:
        """Keep the shared fingerprints; only ``clear()`` deletes them."""
