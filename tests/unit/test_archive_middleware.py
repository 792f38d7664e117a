"""archive/middleware.py: what is copied out of Scrapy's request and response."""

from __future__ import annotations

import datetime
import gzip

from scrapy import Request
from scrapy.http import HtmlResponse, Response

from spiders_project.archive.middleware import exchange_of
from spiders_project.archive.records import IDENTICAL, NOT_MODIFIED
from spiders_project.digests import content_digest
from spiders_project.meta import PAGE_STATE

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
