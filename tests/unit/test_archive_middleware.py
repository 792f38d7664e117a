"""archive/middleware.py: what is copied out of Scrapy's request and response."""

from __future__ import annotations

import datetime
import gzip
import queue

from scrapy import Request, Spider
from scrapy.http import HtmlResponse, Response
from scrapy.utils.test import get_crawler
from warcio.archiveiterator import ArchiveIterator

from spiders_project.archive.config import PAUSE, ArchiveConfig
from spiders_project.archive.files import WarcFiles
from spiders_project.archive.middleware import BACKLOG_HOLDER, ArchiveMiddleware, exchange_of
from spiders_project.archive.records import IDENTICAL, NOT_MODIFIED
from spiders_project.archive.stats import BACKLOG_PAUSES, DROPPED, RECORDS
from spiders_project.archive.writer import ArchiveWriter, Failed
from spiders_project.crawl.digests import content_digest
from spiders_project.crawl.meta import PAGE_STATE

NOW = datetime.datetime(2026, 11, 27, tzinfo=datetime.UTC)
HTML = b"<html><body>x</body></html>"
GZ = gzip.compress(HTML, mtime=0)


def test_the_body_is_taken_as_received_with_every_header():
    request = Request(
        "http://site.test/a", headers={"User-Agent": "bot", "Proxy-Authorization": "Basic eDp5"}
    )
    response = Response(
        "http://site.test/a",
        status=200,
        headers=[("Content-Encoding", "gzip"), ("Set-Cookie", "a=1"), ("Set-Cookie", "b=2")],
        body=GZ,
        request=request,
    )
    ex = exchange_of(request, response, NOW)
    assert ex.body == GZ and ex.revisit is None and ex.rendered is None
    assert ex.protocol == "HTTP/1.1" and ex.date == NOW
    request.meta["download_latency"] = 1.5  # Scrapy's: WARC-Date is when the fetch began
    assert exchange_of(request, response, NOW).date == NOW - datetime.timedelta(seconds=1.5)
    older = Response("http://site.test/a", request=request, protocol="HTTP/1.0")
    assert exchange_of(request, older, NOW).protocol == "HTTP/1.0"
    assert ("Set-Cookie", "a=1") in ex.response_headers
    assert ("Set-Cookie", "b=2") in ex.response_headers
    assert ("User-Agent", "bot") in ex.request_headers
    assert not [name for name, _ in ex.request_headers if name == "Proxy-Authorization"]


def test_revisits_follow_page_state():
    state = {"digest": content_digest(HTML), "fetched_at": "2026-11-26T00:00:00+00:00"}
    request = Request("http://site.test/a", meta={PAGE_STATE: state})
    same = Response(
        "http://site.test/a", headers={"Content-Encoding": "gzip"}, body=GZ, request=request
    )
    assert exchange_of(request, same, NOW).revisit.profile == IDENTICAL
    changed = Response("http://site.test/a", body=b"new", request=request)
    assert exchange_of(request, changed, NOW).revisit is None
    not_modified = Response("http://site.test/a", status=304, request=request)
    assert exchange_of(request, not_modified, NOW).revisit.profile == NOT_MODIFIED


def test_a_rendered_page_keeps_its_document_and_its_dom():
    request = Request("http://site.test/js")
    dom = b"<html><body>built</body></html>"
    response = HtmlResponse("http://site.test/js", body=dom, request=request, flags=["playwright"])
    ex = exchange_of(request, response, NOW, source=b"<html><script></script></html>")
    assert ex.rendered == dom and ex.body == b"<html><script></script></html>"
    missing = exchange_of(request, response, NOW)
    assert missing.body == b"" and missing.extra == {"WARC-Truncated": "unspecified"}


def test_a_full_queue_pauses_fetching_until_the_writer_catches_up(tmp_path):
    """Back-pressure: the reactor never waits for the writer thread; the fetches that
    do not fit wait in a backlog, and fetching pauses until the queue is half empty."""
    crawler = get_crawler(Spider)
    config = ArchiveConfig(
        enabled=True,
        directory=tmp_path,
        max_size=10_000_000,
        prefix="crawl",
        on_error=PAUSE,
        queue_size=2,
    )
    events: queue.Queue = queue.Queue()
    writer = ArchiveWriter(
        WarcFiles(tmp_path, "crawl", "h:1", config.max_size, {}),
        queue_size=2,
        on_error=PAUSE,
        report=events.put,
    )
    mw = ArchiveMiddleware(crawler, config, writer)
    for n in range(5):
        request = Request(f"http://site.test/{n}")
        response = Response(request.url, body=b"x%d" % n, request=request)
        assert mw.process_response(request, response) is response
    assert len(mw.backlog) == 3 and BACKLOG_HOLDER in mw.pauses.holders
    assert crawler.stats.get_value(BACKLOG_PAUSES) == 1  # one pause, not one per fetch
    writer.start()
    while mw.backlog or BACKLOG_HOLDER in mw.pauses.holders:
        mw.on_event(events.get(timeout=10))
    assert writer.stop(10)
    while not events.empty():
        mw.on_event(events.get())
    assert crawler.stats.get_value(RECORDS) == 1 + 5 * 2  # warcinfo, then each fetch's two
    (path,) = tmp_path.iterdir()
    with path.open("rb") as f:
        urls = [
            rec.rec_headers.get_header("WARC-Target-URI")
            for rec in ArchiveIterator(f)
            if rec.rec_type == "response"
        ]
    assert urls == [f"http://site.test/{n}" for n in range(5)]  # in order, none lost


def test_a_dead_writer_thread_never_holds_fetching(tmp_path):
    crawler = get_crawler(Spider)
    config = ArchiveConfig(True, tmp_path, 10_000_000, "crawl", PAUSE, queue_size=1)
    writer = ArchiveWriter(
        WarcFiles(tmp_path, "crawl", "h:1", config.max_size, {}),
        queue_size=1,
        on_error=PAUSE,
        report=lambda event: None,
    )
    mw = ArchiveMiddleware(crawler, config, writer)
    for n in range(3):
        request = Request(f"http://site.test/{n}")
        mw.process_response(request, Response(request.url, request=request))
    assert BACKLOG_HOLDER in mw.pauses.holders
    mw.on_event(Failed("the writer thread failed", first=True, fatal=True))
    assert mw.broken and not mw.backlog and not mw.pauses.holders
    assert crawler.stats.get_value(DROPPED) == 4
    request = Request("http://site.test/late")
    mw.process_response(request, Response(request.url, request=request))
    assert writer.queue.qsize() == 1  # nothing more queued
