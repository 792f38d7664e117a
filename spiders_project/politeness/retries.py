"""Retries that wait in the shared frontier, with exponential backoff; blocks retried too.

Scrapy's RetryMiddleware hands a retry straight back to the scheduler, so a
page answering 503 is asked again at once, by whichever worker leases it
first, as many times as RETRY_TIMES allows within a second. Here a retry
(5xx, timeouts, connection errors, a 429 without Retry-After, a block) goes
back into the shared frontier with a wait of ``RETRY_BACKOFF_BASE`` x
2^(attempt-1), plus up to a quarter more at random (so retries of one outage
spread out), capped at ``RETRY_BACKOFF_MAX``. The frontier keeps it in its
host's "later" set until then (``frontier/lua/enqueue.lua``, ``lease.lua``):
no worker fetches it earlier, and it holds no download slot while it waits.

A 429 or 503 with ``Retry-After`` is retried without backoff of its own:
``SitePacingMiddleware`` already paused its whole host for that long.

A block (``bans.BanRules``: a status in ``BAN_HTTP_CODES``, a body matching
``BAN_BODY_PATTERNS``) is a failed attempt like a 503, whatever its status:
retried with backoff, and once ``RETRY_TIMES`` is used up, a dead letter
with the reason, dropped before the spider (never an item).
"""

from __future__ import annotations

import logging
import random

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.downloadermiddlewares.retry import RetryMiddleware
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response
from scrapy.settings import BaseSettings
from scrapy.utils.response import response_status_message

from spiders_project.config import SettingsReader
from spiders_project.crawl.meta import BLOCKED, OWN_FAILURES, RETRY_WAIT
from spiders_project.dead_letters.middleware import DeadLetters
from spiders_project.politeness.bans import BanRules

logger = logging.getLogger(__name__)


class Backoff:
    """``RETRY_BACKOFF_BASE`` x 2^(attempt-1), plus up to 25% jitter, capped at the max."""

    def __init__(self, base: float, maximum: float, rng: random.Random | None = None) -> None:
        self.base = base
        self.maximum = maximum
        self.rng = rng or random.Random()

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> Backoff:
        read = SettingsReader(settings)
        return cls(
            read.getfloat("RETRY_BACKOFF_BASE", minimum=0),
            read.getfloat("RETRY_BACKOFF_MAX", minimum=0),
        )

    def seconds(self, attempt: int) -> float:
        """The wait before retry number ``attempt`` (1 for the first retry)."""
        wait = self.base * 2 ** max(0, attempt - 1)
        return float(min(self.maximum, wait * (1 + 0.25 * self.rng.random())))


class BackoffRetryMiddleware(RetryMiddleware):
    """Scrapy's RetryMiddleware, with backoff through the frontier and blocks retried.

    Replaces it at 550 (``DOWNLOADER_MIDDLEWARES``); reads the same settings
    (RETRY_TIMES, RETRY_HTTP_CODES, RETRY_EXCEPTIONS, meta ``dont_retry`` and
    ``max_retry_times``), and counts retries in Scrapy's ``retry/*`` stats.
    """

    letters: DeadLetters

    def __init__(self, settings: BaseSettings) -> None:
        super().__init__(settings)
        self.backoff = Backoff.from_settings(settings)
        self.bans = BanRules.from_settings(settings)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> BackoffRetryMiddleware:
        middleware = cls(crawler.settings)
        middleware.crawler = crawler
        middleware.letters = DeadLetters.of(crawler)
        return middleware

    def process_response(  # type: ignore[override]
        self, request: Request, response: Response
    ) -> Request | Response:
        if request.meta.get(OWN_FAILURES):
            return response
        blocked = self.bans.reason(response)
        if blocked is None:
            if response.status in self.retry_http_codes and not request.meta.get("dont_retry"):
                reason = response_status_message(response.status)
                return self._retry(request, reason, response) or response
            return response
        assert self.crawler.stats is not None
        self.crawler.stats.inc_value("bans/blocked")
        request.meta[BLOCKED] = blocked
        if not request.meta.get("dont_retry", False):
            retry = self._retry(request, f"blocked ({blocked})", response)
            if retry is not None:
                return retry
        self.letters.dead_letter(request, f"blocked: {blocked}")
        raise IgnoreRequest(f"blocked: {blocked}")

    def _retry(
        self,
        request: Request,
        reason: str | Exception | type[Exception],
        response: Response | None = None,
    ) -> Request | None:
        retry = super()._retry(request, reason)
        if retry is None:
            return None
        if response is not None and response.headers.get(b"Retry-After"):
            return retry  # its host is paused for as long as the site asked
        wait = self.backoff.seconds(int(retry.meta.get("retry_times", 1)))
        retry.meta[RETRY_WAIT] = int(wait * 1000)
        logger.debug("Retrying %s in %.1f s (%s)", request.url, wait, reason)
        return retry
