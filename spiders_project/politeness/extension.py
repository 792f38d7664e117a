"""Hand politeness to the frontier: no per-process download delay."""

from __future__ import annotations

from scrapy import signals
from scrapy.crawler import Crawler

from spiders_project.insides import internals


class ClusterPoliteness:
    """Sets each worker's downloader delay to 0 once the engine exists.

    ``DOWNLOAD_DELAY`` is enforced cluster-wide by the frontier's lease
    script. If every worker's downloader also delayed its own fetches, a
    request leased for its turn could leave late and land closer to the next
    worker's fetch than the delay. Scrapy's AutoThrottle sets the same
    attribute for the same reason (the default delay of new download slots).
    """

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        crawler.signals.connect(self.engine_started, signal=signals.engine_started)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ClusterPoliteness:
        return cls(crawler)

    def engine_started(self) -> None:
        internals.set_download_delay(self.crawler.engine, 0.0)
