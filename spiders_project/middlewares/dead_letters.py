"""Keep every request that failed for good in ``<spider>:dead``, for ``scrapy deadletters``.

Without it a page that answered 503 three times, or whose host refused every
connection, is gone once RetryMiddleware gives up: one ERROR line in one
worker's log, nothing an operator can list or send back to the frontier.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from datetime import UTC, datetime

from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.http import Response
from scrapy.statscollectors import StatsCollector
from scrapy.utils.misc import load_object

from spiders_project.frontier import serialize
from spiders_project.frontier.context import WorkerRedis
from spiders_project.frontier.dead_letters import make_dead_letter
from spiders_project.frontier.serialize import InvalidEntry
from spiders_project.frontier.values import Unstorable, ValueCodec

logger = logging.getLogger(__name__)


class DeadLetterMiddleware:
    """Writes a dead letter when RetryMiddleware has given up on a request.

    Ordered just before RetryMiddleware (550), e.g. 540: its
    ``process_response`` and ``process_exception`` run after RetryMiddleware's,
    so they see a response or exception only once no retry was scheduled.
    "Failed for good" means what RetryMiddleware retries: an exception in
    ``RETRY_EXCEPTIONS`` or a status in ``RETRY_HTTP_CODES``; other statuses
    (404) and exceptions (IgnoreRequest) are not dead letters. Requests with
    ``dont_retry`` that fail that way are dead letters after one attempt.

    The entry goes through the worker's write batcher (``sink``), so it reaches
    Redis in the same ordered transaction as the ack of the request's lease,
    without blocking the reactor: a killed worker loses neither or redoes both.
    """

    def __init__(
        self,
        sink: Callable[[bytes], None],
        stats: StatsCollector,
        *,
        retry_exceptions: tuple[type[BaseException], ...],
        retry_http_codes: frozenset[int],
        worker: str,
        key: str,
        values: ValueCodec = serialize.PLAIN,
    ) -> None:
        self.sink = sink
        self.values = values
        self.stats = stats
        self.retry_exceptions = retry_exceptions
        self.retry_http_codes = retry_http_codes
        self.worker = worker
        self.key = key  # for the log line only
        # Needed to name callbacks in the request's JSON; set on spider_opened.
        self.spider: Spider | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DeadLetterMiddleware:
        settings = crawler.settings
        if not settings.getbool("DEAD_LETTERS_ENABLED"):
            raise NotConfigured("DEAD_LETTERS_ENABLED is off")
        assert crawler.stats is not None
        redis = WorkerRedis.of(crawler)
        dead = redis.keys.dead
        middleware = cls(
            lambda entry: redis.batcher.push(dead, entry),
            crawler.stats,
            retry_exceptions=tuple(
                load_object(path) for path in settings.getlist("RETRY_EXCEPTIONS")
            ),
            retry_http_codes=frozenset(int(x) for x in settings.getlist("RETRY_HTTP_CODES")),
            worker=f"{socket.gethostname()}:{os.getpid()}",
            key=dead,
            values=ValueCodec.of(crawler),
        )
        crawler.signals.connect(middleware.spider_opened, signal=signals.spider_opened)
        return middleware

    def spider_opened(self, spider: Spider) -> None:
        self.spider = spider

    def process_response(self, request: Request, response: Response) -> Response:
        if response.status in self.retry_http_codes:
            self.dead_letter(request, f"HTTP {response.status}")
        return response

    def process_exception(self, request: Request, exception: Exception) -> None:
        if isinstance(exception, self.retry_exceptions):
            self.dead_letter(request, f"{type(exception).__name__}: {exception}")

    def dead_letter(self, request: Request, error: str) -> None:
        """Queue the dead letter of ``request`` (which failed with ``error``)."""
        attempts = request.meta.get("retry_times", 0) + 1
        payload = self._payload(request)
        if payload is None:
            return
        letter = make_dead_letter(
            payload,
            error=error,
            attempts=attempts,
            failed_at=datetime.now(UTC),
            worker=self.worker,
        )
        self.sink(letter.dumps())
        self.stats.inc_value("dead_letters/count")
        logger.warning(
            "Dead letter: %s failed for good after %d attempts (%s), kept in %s",
            request.url,
            attempts,
            error,
            self.key,
        )

    def _payload(self, request: Request) -> bytes | None:
        """The frontier JSON of ``request``, dropping meta a download added that JSON can't hold.

        A request with such meta was stored in the frontier before it was
        leased, so what is dropped here is download-time state (objects set by
        a download handler or middleware), not something the request needs.
        """
        try:
            data = request.to_dict(spider=self.spider)
        except ValueError as exc:  # a callback that is not a spider method
            logger.error("Dead letter of %s not kept: %s", request.url, exc)
            self.stats.inc_value("dead_letters/unserializable")
            return None
        try:
            return serialize.dumps(data, self.values)
        except InvalidEntry:
            pass
        kept = {}
        for name, value in data["meta"].items():
            try:
                self.values.encode(value)
            except Unstorable:
                continue
            kept[name] = value
        logger.info(
            "Dead letter of %s: meta %s is not JSON, left out",
            request.url,
            sorted(set(data["meta"]) - set(kept)),
        )
        try:
            return serialize.dumps({**data, "meta": kept}, self.values)
        except InvalidEntry as exc:
            logger.error("Dead letter of %s not kept: %s", request.url, exc)
            self.stats.inc_value("dead_letters/unserializable")
            return None
