"""WARC 1.1 records of one fetch, built with warcio, one gzip member each.

A fetch is an :class:`Exchange`: plain data the reactor thread copies out of
Scrapy's request and response, so the records can be built and compressed on
the writer thread. It gives, in this order (the order Heritrix and warcio's
``capture_http`` write):

- a ``response`` record: the status line, the headers and the body as
  received (still Content-Encoding encoded), with ``WARC-Payload-Digest``
  over that body; or a ``revisit`` record (headers only) when the fetch was
  a 304 (profile ``server-not-modified``) or gave the same payload as the
  URL's last fetch (``identical-payload-digest``);
- a ``request`` record, ``WARC-Concurrent-To`` the response;
- for a rendered page, a ``conversion`` record holding the DOM Chromium built,
  ``WARC-Refers-To`` the response.

Two things Scrapy does not keep are rebuilt: the reason phrase (the standard
one for the status, ``http.HTTPStatus``) and the header names' case (Scrapy
title-cases them; values, order and repeats are as received). The body was
already de-chunked by Twisted, so a ``Transfer-Encoding`` header is left out:
a reader would otherwise try to de-chunk it again. docs/ARCHIVE.md says why
this capture is not done in the download handler.
"""

from __future__ import annotations

import datetime
import io
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from urllib.parse import urlsplit

from warcio.statusandheaders import StatusAndHeaders
from warcio.timeutils import datetime_to_iso_date
from warcio.warcwriter import WARCWriter

from spiders_project.crawl.digests import content_digest

WARC_VERSION = "WARC/1.1"
NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
IDENTICAL = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
# zlib level 6, not warcio's 9: most of the compression for much less CPU
# (docs/BENCHMARKS.md, "Figures moved out of code comments").
GZIP_LEVEL = 6
_DROPPED_HEADERS = frozenset({"transfer-encoding"})

Headers = Sequence[tuple[str, str]]


@dataclass(frozen=True)
class Revisit:
    """Why a fetch is a revisit, and what it refers to (the URL's last capture)."""

    profile: str  # NOT_MODIFIED or IDENTICAL
    refers_to_uri: str
    refers_to_date: str | None  # WARC date of the last fetch, when known


@dataclass(frozen=True)
class Exchange:
    """One fetch: what was sent and what came back, as plain data."""

    url: str
    date: datetime.datetime  # when the response came (UTC)
    method: str
    request_headers: Headers
    request_body: bytes
    status: int
    response_headers: Headers
    body: bytes  # as received: before Content-Encoding is undone
    ip: str | None = None
    revisit: Revisit | None = None
    rendered: bytes | None = None  # a rendered page's DOM, UTF-8
    protocol: str = "HTTP/1.1"
    extra: Mapping[str, str] = field(default_factory=dict)  # more WARC headers


def warc_date(when: datetime.datetime) -> str:
    """A WARC 1.1 date with microseconds, UTC."""
    utc = when.astimezone(datetime.UTC).replace(tzinfo=None)
    return str(datetime_to_iso_date(utc, use_micros=True))


def gzip_member(data: bytes) -> bytes:
    """``data`` as one complete gzip member."""
    compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, zlib.MAX_WBITS + 16)
    return compressor.compress(data) + compressor.flush()


def status_line(status: int) -> str:
    """``200 OK``: the status and its standard reason phrase (Scrapy drops the one sent)."""
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = ""
    return f"{status} {phrase}".rstrip()


def kept_headers(headers: Headers) -> list[tuple[str, str]]:
    return [(name, value) for name, value in headers if name.lower() not in _DROPPED_HEADERS]


def request_line(method: str, url: str, protocol: str) -> str:
    parts = urlsplit(url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return f"{method} {target} {protocol}"


class RecordBuilder:
    """Builds the records of exchanges and warcinfo, each as one gzip member."""

    def __init__(self) -> None:
        self._buffer = io.BytesIO()
        self._writer = WARCWriter(self._buffer, gzip=False, warc_version=WARC_VERSION)

    def _member(self, record: object) -> bytes:
        self._buffer.seek(0)
        self._buffer.truncate()
        self._writer.write_record(record)
        return gzip_member(self._buffer.getvalue())

    def warcinfo(self, filename: str, info: Mapping[str, str]) -> bytes:
        """The first record of every file: who wrote it (crawler, version, spider, worker)."""
        return self._member(self._writer.create_warcinfo_record(filename, dict(info)))

    def exchange(self, ex: Exchange) -> list[bytes]:
        """The records of one fetch, in writing order (see the module docstring)."""
        date = warc_date(ex.date)
        common = {"WARC-Date": date}
        if ex.ip:
            common["WARC-IP-Address"] = ex.ip
        http = StatusAndHeaders(
            status_line(ex.status), kept_headers(ex.response_headers), protocol=ex.protocol
        )
        if ex.revisit is None:
            response = self._writer.create_warc_record(
                ex.url,
                "response",
                payload=io.BytesIO(ex.body),
                length=len(ex.body),
                http_headers=http,
                warc_headers_dict={**common, **ex.extra},
            )
        else:
            response = self._revisit(ex, http, {**common, **ex.extra})
        response_id = response.rec_headers.get_header("WARC-Record-ID")
        headers = list(ex.request_headers)
        if not any(name.lower() == "host" for name, _ in headers):
            headers.insert(0, ("Host", urlsplit(ex.url).netloc))
        request = self._writer.create_warc_record(
            ex.url,
            "request",
            payload=io.BytesIO(ex.request_body),
            length=len(ex.request_body),
            http_headers=StatusAndHeaders(
                request_line(ex.method, ex.url, ex.protocol), headers, is_http_request=True
            ),
            warc_headers_dict={**common, "WARC-Concurrent-To": response_id},
        )
        members = [self._member(response), self._member(request)]
        if ex.rendered is not None:
            dom = self._writer.create_warc_record(
                ex.url,
                "conversion",
                payload=io.BytesIO(ex.rendered),
                length=len(ex.rendered),
                warc_content_type="text/html; charset=utf-8",
                warc_headers_dict={**common, "WARC-Refers-To": response_id},
            )
            members.append(self._member(dom))
        return members

    def _revisit(self, ex: Exchange, http: StatusAndHeaders, warc: dict[str, str]) -> object:
        assert ex.revisit is not None
        record = self._writer.create_warc_record(
            ex.url, "revisit", http_headers=http, warc_headers_dict=warc
        )
        rec = record.rec_headers
        rec.add_header("WARC-Profile", ex.revisit.profile)
        rec.add_header("WARC-Refers-To-Target-URI", ex.revisit.refers_to_uri)
        if ex.revisit.refers_to_date:
            rec.add_header("WARC-Refers-To-Date", ex.revisit.refers_to_date)
        if ex.revisit.profile == IDENTICAL:
            rec.add_header("WARC-Payload-Digest", payload_digest(ex.body))
        return record


def payload_digest(body: bytes) -> str:
    """``sha1:<BASE32>`` of the payload as received: what WARC-Payload-Digest holds."""
    return content_digest(body)
