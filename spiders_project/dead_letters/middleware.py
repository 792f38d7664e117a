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

from spiders_project.crawl.meta import OWN_FAILURES
from spiders_project.dead_letters.config import DeadLettersConfig
from spiders_project.dead_letters.letters import make_dead_letter
from spiders_project.frontier.codec import serialize
from spiders_project.frontier.codec.serialize import InvalidEntry
from spiders_project.frontier.codec.values import Unstorable, ValueCodec
from spiders_project.frontier.context import WorkerRedis
from spiders_project.frontier.outcomes import request_dead_lettered
from spiders_project.frontier.steps import FrontierSteps
from spiders_project.plumbing.wiring import shared

logger = logging.getLogger(__name__)


class DeadLetters:
    """Writes dead letters: the JSON request, its error and attempts, in ``<spider>:dead``.

    One per worker (``of``): DeadLetterMiddleware writes those of requests
    RetryMiddleware gave up on, and BackoffRetryMiddleware those of blocked
    answers it gave up on (which never reach the spider). The entry goes
    through the worker's write batcher (``sink``), so it reaches Redis in the
    same ordered transaction as the ack of the request's lease, without
    blocking the reactor: a killed worker loses neither or redoes both.
    ``sink`` None (DEAD_LETTERS_ENABLED off) logs the failure only.
    """

    def __init__(
        self,
        sink: Callable[[bytes], None] | None,
        stats: StatsCollector,
        *,
        worker: str,
        key: str,
        values: ValueCodec = serialize.PLAIN,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        written: Callable[[Request], object] = lambda request: None,
        stored: Callable[[Request], Request] = lambda request: request,
    ) -> None:
        self.sink = sink
        # What a request loses before it is stored (the frontier steps' ``stored``
        # hooks: a pool proxy's credentials, proxies/steps.py).
        self.stored = stored
        # Told each request whose letter is written: its job counts it (frontier/outcomes.py).
        self.written = written
        # The time a letter is stamped with: Redis' clock in a worker (RedisTime).
        self.clock = clock
        self.values = values
        self.stats = stats
        self.worker = worker
        self.key = key  # for the log line only
        # Needed to name callbacks in the request's JSON; set on spider_opened.
        self.spider: Spider | None = None

    @classmethod
    def of(cls, crawler: Crawler) -> DeadLetters:
        def build() -> DeadLetters:
            assert crawler.stats is not None
            redis = WorkerRedis.of(crawler)
            dead = redis.keys.dead
            letters = cls(
                (lambda entry: redis.batcher.push(dead, entry))
                if DeadLettersConfig.from_settings(crawler.settings).enabled
                else None,
                crawler.stats,
                worker=f"{socket.gethostname()}:{os.getpid()}",
                key=dead,
                values=ValueCodec.of(crawler),
                clock=redis.time.now_datetime,
                written=lambda request: crawler.signals.send_catch_log(
                    request_dead_lettered, request=request
                ),
                stored=FrontierSteps.of(crawler).stored,
            )
            crawler.signals.connect(letters.spider_opened, signal=signals.spider_opened)
            return letters

        return shared(crawler, cls, build)

    def spider_opened(self, spider: Spider) -> None:
        self.spider = spider

    def dead_letter(self, request: Request, error: str) -> None:
        """Queue the dead letter of ``request`` (which failed with ``error``)."""
        if request.meta.get(OWN_FAILURES):
            return  # its sender handles it (robots.txt)
        attempts = request.meta.get("retry_times", 0) + 1
        if self.sink is None:
            logger.warning(
                "%s failed for good after %d attempts (%s); DEAD_LETTERS_ENABLED is off",
                request.url,
                attempts,
                error,
            )
            return
        payload = self._payload(self.stored(request.copy()))
        if payload is None:
            return
        letter = make_dead_letter(
            payload,
            error=error,
            attempts=attempts,
            failed_at=self.clock(),
            worker=self.worker,
        )
        self.sink(letter.dumps())
        self.written(request)
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


class DeadLetterMiddleware:
    """Writes a dead letter when RetryMiddleware has given up on a request.

    Ordered just before RetryMiddleware (550), e.g. 540: its
    ``process_response`` and ``process_exception`` run after RetryMiddleware's,
    so they see a response or exception only once no retry was scheduled.
    "Failed for good" means what RetryMiddleware retries: an exception in
    ``RETRY_EXCEPTIONS`` or a status in ``RETRY_HTTP_CODES``; other statuses
    (404) and exceptions (IgnoreRequest) are not dead letters. Requests with
    ``dont_retry`` that fail that way are dead letters after one attempt.
    """

    def __init__(
        self,
        letters: DeadLetters,
        *,
        retry_exceptions: tuple[type[BaseException], ...],
        retry_http_codes: frozenset[int],
    ) -> None:
        self.letters = letters
        self.retry_exceptions = retry_exceptions
        self.retry_http_codes = retry_http_codes

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DeadLetterMiddleware:
        config = DeadLettersConfig.from_settings(crawler.settings)
        if not config.enabled:
            raise NotConfigured("DEAD_LETTERS_ENABLED is off")
        return cls(
            DeadLetters.of(crawler),
            retry_exceptions=config.retry_exceptions(),
            retry_http_codes=config.retry_http_codes,
        )

    def process_response(self, request: Request, response: Response) -> Response:
        if response.status in self.retry_http_codes:
            self.letters.dead_letter(request, f"HTTP {response.status}")
        return response

    def process_exception(self, request: Request, exception: Exception) -> None:
        if isinstance(exception, self.retry_exceptions):
            self.letters.dead_letter(request, f"{type(exception).__name__}: {exception}")
