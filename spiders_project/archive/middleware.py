"""``ArchiveMiddleware``: every fetch this worker makes, handed to the WARC writer.

Where it sits (``DOWNLOADER_MIDDLEWARES`` 910): responses pass the
downloader middlewares from the highest number down, so at 910 a response is
seen before HttpCompressionMiddleware (590) undoes its Content-Encoding (the
body is still the bytes the site sent), before RedirectMiddleware (600) turns
a 3xx into a new request, and before the retry middlewares (550) discard a
500: each is a fetch and is archived. Requests pass from the lowest number
up, so by 910 the headers Scrapy adds (User-Agent 500, Accept-Encoding 590,
cookies 700, a proxy's 750) are on the request this records.

Why not in the download handler: the bytes on the wire would need our own
HTTP client. Twisted's already de-chunked the body and normalised the header
names before Scrapy's handler sees them, and the rendering handler's pages
come from Chromium. What is lost (the reason phrase, the header names' case)
is rebuilt in :mod:`.records`; the body, the part that matters for
re-parsing, is exact.

Nothing here blocks: the reactor copies the fetch into an ``Exchange`` and
queues it for the writer thread (:mod:`.writer`). When that queue is full the
exchange waits in a backlog here and fetching pauses (``EnginePauses``,
holder ``archive backlog``) until the queue is half empty: memory is bounded
by the queue plus the fetches already under way. A write error pauses
fetching too (holder ``archive``, leased requests given back) with
``WARC_ON_ERROR=pause``, and only counts with ``continue``.
"""

from __future__ import annotations

import asyncio
import collections
import datetime
import logging
import socket
from importlib.metadata import version
from typing import Any

import scrapy
from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.http import Response
from scrapy.statscollectors import StatsCollector

import spiders_project
from spiders_project.archive.closing import ArchiveClosing
from spiders_project.archive.config import PAUSE, ArchiveConfig
from spiders_project.archive.files import WarcFiles
from spiders_project.archive.records import Exchange
from spiders_project.archive.recovery import recover_dead
from spiders_project.archive.revisits import revisit_of
from spiders_project.archive.sources import RenderedSources
from spiders_project.archive.stats import (
    BACKLOG_PAUSES,
    BYTES,
    DROPPED,
    RECORDS,
    RECOVERED,
    WRITE_ERRORS,
)
from spiders_project.archive.writer import (
    ArchiveWriter,
    Dropped,
    Event,
    Failed,
    Restored,
    Written,
)
from spiders_project.crawl.meta import PAGE_STATE
from spiders_project.frontier.context import worker_id
from spiders_project.plumbing.pauses import EnginePauses

logger = logging.getLogger(__name__)

ERROR_HOLDER = "archive"
# Seconds the writer may take at close to write what is queued (a slow disk).
CLOSE_WAIT = 60
BACKLOG_HOLDER = "archive backlog"


def headers_of(headers: Any) -> list[tuple[str, str]]:
    """Scrapy's headers as (name, value) text pairs, in order, repeats kept."""
    return [
        (name.decode("latin-1"), value.decode("latin-1"))
        for name, values in headers.items()
        for value in values
    ]


def fetch_started(request: Request, now: datetime.datetime) -> datetime.datetime:
    """When the fetch began, WARC-Date's instant: ``now`` less the download's time
    (Scrapy's ``download_latency``), ``now`` without it."""
    latency = request.meta.get("download_latency")
    if isinstance(latency, int | float) and 0 <= latency < 86_400:
        return now - datetime.timedelta(seconds=latency)
    return now


def exchange_of(
    request: Request, response: Response, now: datetime.datetime, source: bytes | None = None
) -> Exchange:
    """The fetch as plain data, with its revisit decided (:mod:`.revisits`)."""
    encoding = (response.headers.get(b"Content-Encoding") or b"").decode("latin-1")
    protocol = response.protocol or ""
    rendered = None
    body = response.body
    extra: dict[str, str] = {}
    if "playwright" in response.flags:
        # The response's body is the DOM Chromium built; the document it received
        # (Content-Encoding already undone by Chromium, and the header dropped
        # by scrapy-playwright) is the rendering handler's ``source``.
        rendered, body = response.body, source if source is not None else b""
        if source is None:
            extra["WARC-Truncated"] = "unspecified"
    return Exchange(
        url=response.url,
        date=fetch_started(request, now),
        method=request.method,
        # A pool proxy's credentials are never stored (proxies/): the header that
        # carries them (HttpProxyMiddleware, 750, runs before this) is left out.
        request_headers=[
            (name, value)
            for name, value in headers_of(request.headers)
            if name.lower() != "proxy-authorization"
        ],
        request_body=request.body,
        status=response.status,
        response_headers=headers_of(response.headers),
        body=body,
        ip=str(response.ip_address) if response.ip_address is not None else None,
        # "Unchanged" compares the body the spider sees: a rendered page's DOM.
        revisit=revisit_of(
            response.url,
            response.status,
            "" if rendered is not None else encoding,
            response.body,
            request.meta.get(PAGE_STATE),
        ),
        rendered=rendered,
        # The version the connection spoke (Twisted's "HTTP/1.1"; None from Chromium).
        protocol=protocol if protocol.startswith("HTTP/") else "HTTP/1.1",
        extra=extra,
    )


class ArchiveMiddleware:
    """Downloader middleware at 910 (see the module docstring)."""

    def __init__(self, crawler: Crawler, config: ArchiveConfig, writer: ArchiveWriter) -> None:
        self.config = config
        self.writer = writer
        self.pauses = EnginePauses.of(crawler)
        self.sources = RenderedSources.of(crawler)
        self.sources.enabled = True
        assert crawler.stats is not None
        self.stats: StatsCollector = crawler.stats
        self.backlog: collections.deque[Exchange] = collections.deque()
        self.broken = False  # the writer thread died: nothing more is archived
        self.closing = ArchiveClosing.of(crawler)
        self._loop: asyncio.AbstractEventLoop | None = None
        crawler.signals.connect(self._opened, signal=signals.spider_opened)
        crawler.signals.connect(self._closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ArchiveMiddleware:
        config = ArchiveConfig.from_settings(crawler.settings)
        if not config.enabled:
            raise NotConfigured("WARC_ENABLED is off")
        assert crawler.spidercls is not None
        info = {
            "software": f"spiders_project/{spiders_project.__version__} "
            f"(Scrapy {scrapy.__version__}, warcio {version('warcio')})",
            "format": "WARC File Format 1.1",
            "conformsTo": "https://iipc.github.io/warc-specifications/specifications/"
            "warc-format/warc-1.1/",
            "robots": "obey" if crawler.settings.getbool("ROBOTSTXT_OBEY") else "ignore",
            "http-header-user-agent": str(crawler.settings.get("USER_AGENT", "")),
            "hostname": socket.gethostname(),
            "spider": str(crawler.spidercls.name),
            "worker": worker_id(),
        }
        files = WarcFiles(config.directory, config.prefix, worker_id(), config.max_size, info)
        middleware: ArchiveMiddleware

        def report(event: Event) -> None:
            middleware.from_thread(event)

        writer = ArchiveWriter(
            files,
            queue_size=config.queue_size,
            on_error=config.on_error,
            report=report,
            retry_interval=config.retry_interval,
        )
        middleware = cls(crawler, config, writer)
        return middleware

    # --- the reactor's side ----------------------------------------------------------
    async def _opened(self) -> None:
        self._loop = asyncio.get_running_loop()
        # Off the reactor too: a dead worker's file may be a GB to read through.
        recovered = await asyncio.to_thread(recover_dead, self.config.directory, self.config.prefix)
        if recovered:
            self.stats.inc_value(RECOVERED, len(recovered))
        self.writer.start()
        self.closing.register(self._finish)
        logger.info(
            "Archiving every fetch as WARC in %s (files %s-*.warc.gz, closed at %d bytes; "
            "on a write error: %s)",
            self.config.directory,
            self.config.prefix,
            self.config.max_size,
            self.config.on_error,
        )

    async def _closed(self) -> None:
        await self.closing.close(CLOSE_WAIT + 5)

    async def _finish(self) -> None:
        """Write what is queued and the backlog, close the file (:mod:`.closing`)."""
        backlog = list(self.backlog)
        self.backlog.clear()
        if not await asyncio.to_thread(self.writer.stop, CLOSE_WAIT, backlog):
            logger.error(
                "The WARC writer did not finish within %d s; its open file stays .open",
                CLOSE_WAIT,
            )
        await asyncio.sleep(0)  # the writer's last reports, queued with call_soon
        if self.writer.failing:
            logger.error(
                "WARC writes still failed at stop: what was queued is not archived "
                "(%d records dropped in all, stat %s)",
                self.stats.get_value(DROPPED, 0),
                DROPPED,
            )

    def process_response(self, request: Request, response: Response) -> Response:
        if self.broken:
            return response
        source = self.sources.bodies.pop(request, None)
        exchange = exchange_of(request, response, datetime.datetime.now(datetime.UTC), source)
        if self.backlog or not self.writer.submit(exchange):
            self.backlog.append(exchange)
            if BACKLOG_HOLDER not in self.pauses.holders:
                self.stats.inc_value(BACKLOG_PAUSES)
                logger.info(
                    "WARC writer behind (%d fetches queued): fetching paused until it catches up",
                    self.writer.queue.maxsize,
                )
                self.pauses.hold(BACKLOG_HOLDER)
        return response

    def _drain(self) -> None:
        """Move the backlog into the writer's queue; fetch again once it is half empty."""
        while self.backlog and self.writer.submit(self.backlog[0]):
            self.backlog.popleft()
        if (
            not self.backlog
            and BACKLOG_HOLDER in self.pauses.holders
            and self.writer.room * 2 >= self.writer.queue.maxsize
        ):
            self.pauses.release(BACKLOG_HOLDER)
            logger.info("WARC writer caught up: fetching again")

    def from_thread(self, event: Event) -> None:
        """The writer thread's ``report``: handled on the reactor."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self.on_event, event)

    def on_event(self, event: Event) -> None:
        if isinstance(event, Written):
            self.stats.inc_value(RECORDS, event.records)
            self.stats.inc_value(BYTES, event.bytes)
            self._drain()
        elif isinstance(event, Failed):
            self.stats.inc_value(WRITE_ERRORS)
            if event.fatal:
                self._broken()
            if event.first:
                self._failed(event.error)
        elif isinstance(event, Dropped):
            self.stats.inc_value(DROPPED, event.records)
        elif isinstance(event, Restored):
            self._restored()

    def _broken(self) -> None:
        """The writer thread died (a bug): nothing more is archived, and nothing may
        wait for it, so its backlog is dropped and fetching resumes."""
        self.broken = True
        if self.backlog:
            self.stats.inc_value(DROPPED, 2 * len(self.backlog))
            self.backlog.clear()
        self.pauses.release(BACKLOG_HOLDER)

    def _failed(self, error: str) -> None:
        if self.broken:
            logger.error("WARC archiving stopped: %s; the crawl goes on without it", error)
        elif self.config.on_error == PAUSE:
            logger.error(
                "WARC write failed (%s): fetching paused until the archive can be written "
                "(WARC_ON_ERROR=pause), tried again every %g s",
                error,
                self.writer.retry_interval,
            )
            self.pauses.hold(ERROR_HOLDER, give_back=True)
        else:
            logger.error(
                "WARC write failed (%s): the crawl goes on without archiving until "
                "writing works again (WARC_ON_ERROR=continue)",
                error,
            )

    def _restored(self) -> None:
        if self.config.on_error == PAUSE:
            logger.warning("WARC writing works again: fetching resumes")
            self.pauses.release(ERROR_HOLDER)
        else:
            logger.warning("WARC writing works again: archiving resumes")
