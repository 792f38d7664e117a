"""Refuse to run on a Scrapy or Playwright whose internals this worker cannot use."""

from __future__ import annotations

import logging
import os
from typing import NoReturn

from scrapy import signals
from scrapy.crawler import Crawler

from spiders_project.config import CONFIG_EXIT_STATUS, ConfigError
from spiders_project.crawl.suffixes import cookie_public_suffixes
from spiders_project.insides import internals

logger = logging.getLogger(__name__)

# Exit status when the check fails (EX_CONFIG from sysexits.h): a restart cannot help.
EXIT_INTERNALS_MISSING = 78


class InternalsCheck:
    """Runs ``internals.check_engine`` and ``check_playwright`` as the spider opens, and
    gives Scrapy's cookie middleware the offline Public Suffix List
    (``COOKIES_PUBLIC_SUFFIX_LIST``, ``crawl/suffixes.py``) before any request.

    ``spider_opened`` is the first signal after the engine's slot and the
    scraper's slot exist (``ExecutionEngine.open_spider_async`` creates both
    before sending it), and it comes before ``engine_started``: the engine
    is not running yet, so the frontier has leased nothing. Listed first in
    EXTENSIONS, this handler runs before those of our other extensions.

    A failure logs one line naming the attribute and the version, then ends
    the process with ``EXIT_INTERNALS_MISSING`` (a list file that cannot be
    read: with ``CONFIG_EXIT_STATUS``, though ``scrapy crawl`` refuses one
    before it starts anything). Raising would not do: Scrapy catches and logs
    (with a traceback) any exception from a signal handler and the crawl
    goes on, and a ``CloseSpider`` would close the spider cleanly and exit
    0, which supervisor reads as a finished crawl.
    """

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> InternalsCheck:
        return cls(crawler)

    def spider_opened(self) -> None:
        try:
            internals.check_engine(self.crawler.engine)
            internals.check_playwright()
            internals.use_public_suffixes(cookie_public_suffixes(self.crawler.settings))
        except internals.InternalsMissing as exc:
            self._refuse(exc, EXIT_INTERNALS_MISSING)
        except ConfigError as exc:
            self._refuse(exc, CONFIG_EXIT_STATUS)

    @staticmethod
    def _refuse(exc: Exception, status: int) -> NoReturn:
        logger.critical("Refusing to start: %s", exc)
        # os._exit skips Scrapy's shutdown, which would run the engine's close
        # path on the very internals found missing; flush the log first.
        logging.shutdown()
        os._exit(status)
