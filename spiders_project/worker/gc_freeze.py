"""Start-up's objects left out of the garbage collector's full passes (``WORKER_GC_FREEZE``).

A worker builds about 150,000 objects that live as long as it does before its
first page: modules, settings, the components, the Lua sources. Every full
collection (generation 2) walks them all again, though none of them is ever
garbage. In a 6,000-page window of ``make bench-quick``'s crawl that was 17-18
full collections and 1.6-1.8 s of the worker's 23 s of CPU; with them frozen
once the spider is open, 0.42-0.47 s (issue 42, item 5; docs/BENCHMARKS.md).

What start-up left as garbage is collected first, so nothing is frozen that
would have been freed. Objects made later are collected as before; a frozen
object whose last reference goes is still freed by its reference count.
"""

from __future__ import annotations

import gc
import logging

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured

from spiders_project.config import SettingsReader

logger = logging.getLogger(__name__)


class FreezeStartup:
    """Extension: ``gc.collect()`` then ``gc.freeze()`` once, when the spider opens."""

    def __init__(self, crawler: Crawler) -> None:
        crawler.signals.connect(self.freeze, signal=signals.spider_opened)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FreezeStartup:
        if not SettingsReader(crawler.settings).getbool("WORKER_GC_FREEZE"):
            raise NotConfigured("WORKER_GC_FREEZE is off")
        return cls(crawler)

    def freeze(self) -> None:
        gc.collect()
        gc.freeze()
        logger.debug("%d objects of start-up left out of full collections", gc.get_freeze_count())
